from pensieve.launch import main

main()
