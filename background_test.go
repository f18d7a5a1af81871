package limiter

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackgroundReusesGoroutines: work handed to background one piece at
// a time runs on one goroutine, kept warm between pieces; concurrent work
// gets a goroutine per piece; wait returns once the work has ended and
// every goroutine has exited.
func TestBackgroundReusesGoroutines(t *testing.T) {
	var b background
	var ran atomic.Int64
	for range 50 {
		done := make(chan struct{})
		b.Go(func() {
			ran.Add(1)
			close(done)
		})
		<-done
		// Wait until the goroutine parked again, so that the next piece
		// finds it.
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.idle) == 1
		}, 5*time.Second, time.Millisecond)
	}
	assert.Equal(t, int64(50), ran.Load())
	b.mu.Lock()
	assert.Len(t, b.idle, 1, "one goroutine, parked")
	b.mu.Unlock()

	// 8 at once: each piece blocks until all 8 run, so 8 goroutines.
	var start sync.WaitGroup
	start.Add(8)
	for range 8 {
		b.Go(func() {
			start.Done()
			start.Wait()
		})
	}
	b.wait() // returns once every goroutine has exited
	b.mu.Lock()
	assert.Empty(t, b.idle)
	b.mu.Unlock()
}

// TestBackgroundIdleExit: a goroutine that waits longer than workerIdle
// for work exits by itself.
func TestBackgroundIdleExit(t *testing.T) {
	t.Parallel() // waits out workerIdle on a background of its own
	var b background
	done := make(chan struct{})
	b.Go(func() { close(done) })
	<-done
	assert.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.idle) == 0 && b.sweep == nil
	}, workerIdle+5*time.Second, 10*time.Millisecond, "the parked goroutine retired by the sweep")
	// It can be used again afterwards.
	var ran atomic.Bool
	b.Go(func() { ran.Store(true) })
	b.wait()
	assert.True(t, ran.Load())
}
