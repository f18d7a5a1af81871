// Package invariant counts the breaches of the limiter's own invariants
// that it recovers from instead of failing a call, so that the tests of any
// package (the cross-backend programs included) can check that none
// happened. Nothing outside the module reads it.
package invariant

import "sync/atomic"

// BrokenRefusals counts the refusals built without an exceeded status with
// a positive Retry-After: a refusal that no shortage explains (a lost race
// reported as a denial). It must stay zero.
var BrokenRefusals atomic.Int64
