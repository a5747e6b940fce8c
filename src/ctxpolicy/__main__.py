from ctxpolicy.cli import main

raise SystemExit(main())
