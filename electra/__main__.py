from electra.cli.main import main

raise SystemExit(main())
