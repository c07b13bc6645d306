import sys

from pycoll.bench.harness import main

sys.exit(main())
