from pensieve.cli import main

main()
