from profplug.cli import main

raise SystemExit(main())
