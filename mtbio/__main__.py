"""`python -m mtbio ...` (used by `accelerate launch -m mtbio`)."""
from mtbio.cli import main

main()
