from cozyrender.cli import main

main()
