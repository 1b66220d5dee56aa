from edge_infer.cli import main

raise SystemExit(main())
