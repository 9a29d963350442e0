"""`python -m intellect.agents.demo` (`make demo`): the local swarm (`intellect.agents.demo.swarm`)."""

from intellect.agents.demo.swarm import main

if __name__ == "__main__":
    main()
