"""``python -m threadline.cli``."""

from threadline.cli import main

if __name__ == "__main__":
    main()
