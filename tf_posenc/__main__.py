import sys

from tf_posenc.cli import main

if __name__ == "__main__":
    sys.exit(main())
