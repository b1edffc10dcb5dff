from sensorveil.cli import main

raise SystemExit(main())
