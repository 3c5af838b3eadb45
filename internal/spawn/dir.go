package spawn

// lockFile is the file in the fixed socket directory on which a sluice
// process whose spawned containers use that directory holds an flock, for
// its life.
const lockFile = ".sluice.lock"
