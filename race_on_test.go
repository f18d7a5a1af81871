//go:build race

package limiter

// raceEnabled reports whether the race detector is on: it makes every
// call several times slower, which tests that measure the store's real
// timing cannot tell from a slow store.
const raceEnabled = true
