from firm.cli.main import main

main()
