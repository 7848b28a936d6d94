from firm.cli.main import entry

entry()
