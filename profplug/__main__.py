from profplug.cli.main import main

raise SystemExit(main())
