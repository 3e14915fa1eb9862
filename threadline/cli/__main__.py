"""``python -m threadline.cli``."""

from threadline.cli import main

main()
