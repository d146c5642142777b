"""The heads of the shipped kinds, one module per kind, imported when a run builds one (`TaskKind.head`): a kind's
declaration, which validating a task definition reads, imports without torch."""
