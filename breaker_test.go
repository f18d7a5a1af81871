package limiter

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testBreaker returns a closed breaker with a minimum of failures calls,
// epochs of 10 ms, calls bound to 100 ms from their epoch's start, a
// grace of 50 ms and a window of 10 s, and the count of its openings.
func testBreaker(failures int32) (*breaker, *atomic.Int32) {
	opened := &atomic.Int32{}
	b := &breaker{failures: failures, cooldown: time.Minute, grace: 50 * time.Millisecond, window: 10 * time.Second,
		span: int64(100 * time.Millisecond), epoch: int64(10 * time.Millisecond)}
	b.changed = func(_, to circuitState, _ int, _ error) {
		if to == circuitOpen {
			opened.Add(1)
		}
	}
	return b, opened
}

// monoAgo returns monoNow's time d ago, once the clock is past d (a
// positive time, as an epoch's start always is).
func monoAgo(d time.Duration) int64 {
	for monoNow() <= int64(2*d) {
		time.Sleep(10 * time.Millisecond)
	}
	return monoNow() - int64(d)
}

// TestBreakerFailureRate: the breaker opens on the share of failed calls
// in its window, with a minimum number of calls, and counts the timeouts
// of one stall once, placed by the calls' bounds:
//
//   - a store failing two calls of three, answers in between, opens it
//     at the fifth call (a count of consecutive failures never would);
//   - one failure in ten over 1,000 calls does not;
//   - 32 timeouts of one stall followed by the answer of a call made
//     after it began, within the grace, count as one failure; left
//     unanswered past the grace, or answered only for calls made before
//     it began (a black hole answers the calls it had taken), they count
//     in full and open it;
//   - a call made after the stall showed that times out too counts the
//     stall in full;
//   - a stall unanswered past the grace opens it also after a busy
//     window (one failure among 500 answers);
//   - timeouts counted after their stall's grace passed (a loaded
//     machine's late goroutines) open it at once, not a grace later; an
//     answer within the grace keeps it closed however late the timeouts
//     are counted;
//   - a minimum of one opens it on any failure; an answered probe empties
//     the window.
func TestBreakerFailureRate(t *testing.T) {
	cause := errors.New("store down")
	t.Run("two-of-three", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		for i := 1; i <= 5; i++ {
			o := callFailed
			if i%3 == 0 {
				o = callAnswered
			}
			require.Zero(t, opened.Load(), "opened before call %d", i)
			b.settle(false, o, cause, 0)
		}
		require.EqualValues(t, 1, opened.Load(), "4 of 5 calls failed")
		require.True(t, b.rejecting())
	})
	t.Run("one-in-ten", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		for i := range 1000 {
			o := callAnswered
			if i%10 == 0 {
				o = callFailed
			}
			b.settle(false, o, cause, 0)
		}
		require.Zero(t, opened.Load())
		require.Equal(t, 100, b.counted(), "the failures of the window")
	})
	t.Run("stall-answered", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		began := monoNow()
		for range 32 {
			b.settle(false, callTimedOut, cause, began)
		}
		b.settle(false, callAnswered, nil, began+2*b.epoch)
		time.Sleep(200 * time.Millisecond) // past the grace
		require.Zero(t, opened.Load())
		require.Equal(t, 1, b.counted(), "one stall, one failure")
		// A late timeout of the stall that ended counts nothing.
		b.settle(false, callTimedOut, cause, began)
		require.Equal(t, 1, b.counted())
	})
	t.Run("stall-unanswered", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		began := monoNow()
		for range 8 {
			b.settle(false, callTimedOut, cause, began)
		}
		require.Zero(t, opened.Load(), "within the grace")
		require.Eventually(t, func() bool { return opened.Load() == 1 }, time.Second, 5*time.Millisecond)
		require.Equal(t, 8, b.counted())
	})
	t.Run("stall-after-busy-window", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		// A failure, then 500 answers: the window's share of failures is
		// small when the store stops answering.
		b.settle(false, callFailed, cause, 0)
		for range 500 {
			b.settle(false, callAnswered, nil, monoNow())
		}
		began := monoNow()
		for range 8 {
			b.settle(false, callTimedOut, cause, began)
		}
		require.Zero(t, opened.Load(), "within the grace")
		require.Eventually(t, func() bool { return opened.Load() == 1 }, time.Second, 5*time.Millisecond)
		require.Equal(t, 9, b.counted())
	})
	t.Run("stall-answered-before", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		began := monoNow()
		for range 8 {
			b.settle(false, callTimedOut, cause, began)
		}
		for range 8 {
			b.settle(false, callAnswered, nil, began+b.epoch) // calls taken when the stall began
		}
		require.Eventually(t, func() bool { return opened.Load() == 1 }, time.Second, 5*time.Millisecond)
		require.Equal(t, 8, b.counted())
	})
	t.Run("stall-spread", func(t *testing.T) {
		b, opened := testBreaker(5)
		b.grace = time.Hour // only the spread may count it in full
		defer b.stop()
		began := monoNow()
		for range 3 {
			b.settle(false, callTimedOut, cause, began)
		}
		require.Equal(t, 1, b.counted())
		b.settle(false, callTimedOut, cause, began+b.span) // made after the stall showed
		require.Equal(t, 4, b.counted())
		require.Zero(t, opened.Load())
		b.settle(false, callTimedOut, cause, began+b.span+b.epoch)
		require.EqualValues(t, 1, opened.Load())
	})
	t.Run("counted-late-opens-at-once", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		// The calls' epoch began a second ago: their stall showed and its
		// grace passed long before their timeouts are counted.
		began := monoAgo(time.Second)
		for i := 1; i <= 5; i++ {
			require.Zero(t, opened.Load(), "opened before timeout %d", i)
			b.settle(false, callTimedOut, cause, began)
		}
		require.EqualValues(t, 1, opened.Load(), "the fifth timeout, counted after the grace, opens it at once")
		require.Equal(t, 5, b.counted())
	})
	t.Run("counted-late-answered-within-grace", func(t *testing.T) {
		b, opened := testBreaker(5)
		defer b.stop()
		began := monoAgo(time.Second)
		b.settle(false, callTimedOut, cause, began)
		// The store answered a call made after the stall began; its
		// answer is counted before the stall's other timeouts.
		b.settle(false, callAnswered, nil, began+3*b.epoch)
		for range 31 {
			b.settle(false, callTimedOut, cause, began)
		}
		time.Sleep(20 * time.Millisecond) // the grace timer, already due, has run
		require.Zero(t, opened.Load())
		require.Equal(t, 1, b.counted())
	})
	t.Run("minimum-one-and-probe", func(t *testing.T) {
		b, opened := testBreaker(1)
		defer b.stop()
		for range 100 {
			b.settle(false, callAnswered, nil, 0)
		}
		b.settle(false, callTimedOut, cause, monoNow())
		require.EqualValues(t, 1, opened.Load())
		b.reopenAt.Store(0)
		ok, probe := b.admit()
		require.True(t, ok)
		require.True(t, probe)
		b.settle(true, callAnswered, nil, 0)
		require.Equal(t, circuitClosed, circuitState(b.state.Load()))
		require.Zero(t, b.counted())
	})
}
