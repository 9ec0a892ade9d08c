module seedbench

go 1.19
