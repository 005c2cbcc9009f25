import sys

from tf_posenc.cli import main

sys.exit(main())
