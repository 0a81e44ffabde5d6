from cake.cli import main

raise SystemExit(main())
