from cudashim.cli import main

raise SystemExit(main())
