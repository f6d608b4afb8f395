"""raychaos: chaos and fault-tolerance experiments against real Ray clusters."""
