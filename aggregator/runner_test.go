package aggregator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// snapshotFault fails the snapshot writes while *left > 0 (each failure
// counts down; a negative start fails for ever).
func snapshotFault(left *atomic.Int32, err error) func(*dynamodb.Options) {
	return ddblocal.WithFault(func(_ context.Context, op string, in any) error {
		var pk string
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			pk = in.Key["PK"].(*types.AttributeValueMemberS).Value
		case *dynamodb.TransactWriteItemsInput:
			pk = in.TransactItems[0].Update.Key["PK"].(*types.AttributeValueMemberS).Value
		}
		if !strings.Contains(pk, "/ENTITY#") || left.Load() == 0 {
			return nil
		}
		left.Add(-1)
		return err
	})
}

// TestE2ERunnerRetriesFailedRecords: a snapshot write that fails once is
// retried by the runner with the failed records only, and counts once; one
// that keeps failing is dropped after MaxRetries and reported.
func TestE2ERunnerRetriesFailedRecords(t *testing.T) {
	outage := errors.New("injected outage")
	for _, tc := range []struct {
		name     string
		failures int32
		dropped  bool
	}{{"transient", 1, false}, {"persistent", -1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var left atomic.Int32
			left.Store(tc.failures)
			proc, err := NewProcessor(ddblocal.Client(t, e.procRec.Option(), snapshotFault(&left, outage)), e.repo.Table(),
				func(o *Options) { o.Now = e.clock.now; o.Windows = []string{store.WindowHourly} })
			if err != nil {
				t.Fatal(err)
			}
			runner := NewRunner(ddblocal.StreamsClient(t), e.repo.Table(), proc, func(o *RunnerOptions) { o.MaxRetries = 2 })
			rl := e.limiter(true)
			lim := limiter.WithLimits(limiter.PerMinute("rpm", 100))
			for range 3 {
				mustCommit(t, mustAcquire(t, rl, "r", "api", limiter.Consume{"rpm": 1}, lim))
			}
			res, err := runner.Poll(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			snaps, _, err := rl.UsageSnapshots(e.ctx, limiter.UsageQuery{EntityID: "r"})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.dropped {
				if len(res.Failures) != 0 || len(snaps) != 1 || snaps[0].Counters["rpm"] != 3 {
					t.Fatalf("failures %v, snapshots %+v; want rpm 3 counted once", res.Failures, snaps)
				}
				return
			}
			if len(res.Failures) == 0 || !errors.Is(res.Failures[0].Err, outage) || len(snaps) != 0 {
				t.Fatalf("failures %v, snapshots %+v; want the records dropped and nothing counted", res.Failures, snaps)
			}
			if got := e.procRec.Count("TransactWriteItems") + e.procRec.Count("UpdateItem"); got < 3 {
				t.Fatalf("%d snapshot attempts, want 1 + 2 retries", got)
			}
		})
	}
}
