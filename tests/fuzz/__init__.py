"""Property-based fuzzing of every input Loom takes from outside: policy files, REST
requests and frames (issue "Hostile input everywhere"). ``checks`` holds the invariants,
``strategies_*`` the generators, ``bench`` the >= 10,000-case benchmark program."""
