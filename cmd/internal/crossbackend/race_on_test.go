//go:build race

package crossbackend_test

// raceEnabled reports whether the race detector is on: it makes every call
// several times slower, so timing floors that hold on a plain build are
// relaxed under it.
const raceEnabled = true
