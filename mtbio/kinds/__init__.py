"""The shipped task kinds, one module each (`mtbio.tasks.kinds` describes the unit). Importing this package
imports every module in it, which registers its kind: a new kind is one module here with a `@register_kind`
class (a plugin's kind registers the same way from its own package)."""
from mtbio.registry import import_modules

import_modules(__name__, __path__)
