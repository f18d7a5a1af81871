// Layer 1, math and models: prepaid limits. A prepaid limit's balance is the
// ordinary bucket (E, R/L.balance), created empty, refilling one token a
// century (store.Limit.PrepaidBucketLimit): only top-ups fill it, and it
// never expires.

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store"
)

// BalanceRetryAfter is the RetryAfter of a refusal by a prepaid balance
// that cannot cover the amount: the balance does not refill, so no wait
// is known to help (the refusal's NeverFits is true and [RateLimiter.Wait]
// fails at once, and its message says to top up and gives no retry time);
// a client that retries anyway waits this long. It is a back-off, not a
// promise: [RateLimitExceededError.RetryAfterHeader] says 3601 for it, but
// an HTTP answer should not send it: the httplimit middleware answers a
// refusal matching [ErrBalanceExhausted] with 402 Payment Required and no
// Retry-After, as a service that wants its caller to pay should.
const BalanceRetryAfter = time.Hour

// prepaidKind is the kind of a prepaid limit.
type prepaidKind struct{}

func (k prepaidKind) items(l store.Limit, resource string, v int64, now time.Time, genMs int64, add itemAdder) error {
	bucket, bl, next, err := k.bucket(l, resource, now, genMs)
	if err != nil {
		return err
	}
	return add(bucket, []store.Limit{bl}, Consume{l.Name: v}, &l, next)
}

// bucket returns the balance's bucket, which is always the current one.
func (prepaidKind) bucket(l store.Limit, resource string, _ time.Time, _ int64) (string, store.Limit, int64, error) {
	bucket, err := l.PrepaidBucket(resource)
	return bucket, l.PrepaidBucketLimit(), 0, err
}

// expireAt: a balance never expires.
func (prepaidKind) expireAt(store.Limit, int64) int64 { return 0 }

func (prepaidKind) retryAfter(store.Limit, int64, int64) time.Duration { return BalanceRetryAfter }

// unwritten: a balance never topped up is empty.
func (prepaidKind) unwritten(store.Limit) int64 { return 0 }

// refills: only a top-up refills a balance.
func (prepaidKind) refills(store.Limit) bool { return false }

// reset: a balance is never full again by itself.
func (prepaidKind) reset(store.Limit, time.Duration, int64) time.Duration { return 0 }

func (prepaidKind) phrase(store.Limit, string) string { return "the prepaid balance" }

// carriesSpend: nothing carries into or out of a balance.
func (prepaidKind) carriesSpend() bool { return false }
