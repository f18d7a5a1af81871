package aggregator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/iterx"
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
			require.NoError(t, err)
			runner := NewRunner(ddblocal.StreamsClient(t), e.repo.Table(), proc, func(o *RunnerOptions) { o.MaxRetries = 2 })
			rl := e.limiter(true)
			lim := limiter.WithLimits(limiter.PerMinute("rpm", 100))
			for range 3 {
				mustCommit(t, mustAcquire(t, rl, "r", "api", limiter.Consume{"rpm": 1}, lim))
			}
			res, err := runner.Poll(e.ctx)
			require.NoError(t, err)
			snaps, err := iterx.Collect(rl.Admin().UsageSnapshots(e.ctx, limiter.UsageQuery{EntityID: "r"}))
			require.NoError(t, err)
			if !tc.dropped {
				require.Empty(t, res.Failures, "failures %v, snapshots %+v; want rpm 3 counted once", res.Failures, snaps)
				require.Len(t, snaps, 1, "failures %v, snapshots %+v; want rpm 3 counted once", res.Failures, snaps)
				require.EqualValues(t, 3, snaps[0].Counters["rpm"], "failures %v, snapshots %+v; want rpm 3 counted once", res.Failures, snaps)
				return
			}
			require.NotEmpty(t, res.Failures, "failures %v, snapshots %+v; want the records dropped and nothing counted", res.Failures, snaps)
			require.ErrorIs(t, res.Failures[0].Err, outage, "failures %v, snapshots %+v; want the records dropped and nothing counted", res.Failures, snaps)
			require.Empty(t, snaps, "failures %v, snapshots %+v; want the records dropped and nothing counted", res.Failures, snaps)
			require.GreaterOrEqual(t, e.procRec.Count("TransactWriteItems")+e.procRec.Count("UpdateItem"), 3)
		})
	}
}
