package crossbackend_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// TestPrepaidLifecycle: a prepaid balance starts empty (the first acquire
// is refused with ErrBalanceExhausted, NeverFits, RetryAfter
// BalanceRetryAfter), a top-up fills it, acquires take estimates from it,
// Commit settles the actual and Rollback returns the estimate, and an
// actual over its estimate takes the balance below zero by the overrun
// only. The balance is read back through Available.
func TestPrepaidLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd")}))
		balance := func() int64 {
			avail, err := rl.Available(ctx, "acct", "gpt-4o")
			require.NoError(t, err)
			return avail["usd"]
		}
		require.Equal(t, int64(0), balance())

		_, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1})
		require.ErrorIs(t, err, limiter.ErrBalanceExhausted)
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		var rle *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, limiter.BalanceRetryAfter, rle.RetryAfter)
		require.Equal(t, "usd", rle.Primary.LimitName)
		require.Equal(t, limiter.Prepaid("usd"), rle.Primary.Limit)
		require.Equal(t, true, rle.NeverFits())
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		start := time.Now()
		_, err = rl.Wait(wctx, "acct", "gpt-4o", limiter.Consume{"usd": 1})
		cancel()
		require.ErrorIs(t, err, limiter.ErrBalanceExhausted, "Wait does not wait for a top-up")
		require.Less(t, time.Since(start), 10*time.Second)

		res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		require.Equal(t, limiter.TopUpResult{Applied: true}, res)
		require.Equal(t, int64(1000), balance())

		lease, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 300})
		require.NoError(t, err)
		require.Equal(t, int64(700), balance(), "the estimate is taken")
		require.NoError(t, lease.Adjust(limiter.Consume{"usd": -100}))
		require.NoError(t, lease.Commit(ctx))
		require.Equal(t, int64(800), balance(), "the actual, 200, is charged")

		lease, err = rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 500})
		require.NoError(t, err)
		require.NoError(t, lease.Rollback(ctx))
		require.Equal(t, int64(800), balance(), "a rollback returns the estimate")

		_, err = rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 801})
		require.ErrorIs(t, err, limiter.ErrBalanceExhausted)
		require.Equal(t, int64(800), balance(), "a refusal takes nothing")

		lease, err = rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 800})
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(limiter.Consume{"usd": 50}))
		require.NoError(t, lease.Commit(ctx))
		require.Equal(t, int64(-50), balance(), "an overrun of 50 over the estimate")

		_, err = rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"usd": 1})
		require.ErrorIs(t, err, limiter.ErrBalanceExhausted)
		res, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 100, ID: "pay-2"})
		require.NoError(t, err)
		require.Equal(t, true, res.Applied)
		require.Equal(t, int64(50), balance())

		events, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "acct"))
		if err == nil {
			var topUps []string
			for _, ev := range events {
				if ev.Action == store.AuditBalanceTopUp {
					topUps = append(topUps, fmt.Sprintf("%s %v %v %v", ev.Resource, ev.Details["limit"], ev.Details["amount"], ev.Details["topup_id"]))
				}
			}
			require.ElementsMatch(t, []string{"gpt-4o usd 1000 pay-1", "gpt-4o usd 100 pay-2"}, topUps)
		}
	})
}

// TestPrepaidTopUpIdempotent: a top-up id applies once, whether it is sent
// again after it applied or by 20 callers at once; sent again with another
// amount it is refused (ErrTopUpConflict); another id, another limit or
// another entity is another top-up.
func TestPrepaidTopUpIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		limits := []limiter.Limit{limiter.Prepaid("usd"), limiter.Prepaid("credits")}
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, limits))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "other", Resource: "gpt-4o"}, limits))
		balance := func(entity, limit string) int64 {
			avail, err := rl.Available(ctx, entity, "gpt-4o")
			require.NoError(t, err)
			return avail[limit]
		}

		res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 500, ID: "pay-1"})
		require.NoError(t, err)
		require.Equal(t, true, res.Applied)
		res, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 500, ID: "pay-1"})
		require.NoError(t, err)
		require.Equal(t, false, res.Applied)
		require.Equal(t, int64(500), balance("acct", "usd"))
		// The same id with another amount is another payment's mistake,
		// not a retry: refused, nothing added.
		res, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 600, ID: "pay-1"})
		require.ErrorIs(t, err, limiter.ErrTopUpConflict)
		require.Equal(t, false, res.Applied)
		require.Equal(t, int64(500), balance("acct", "usd"))

		const callers = 20
		var applied atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-2"})
				errs[i] = err
				if res.Applied {
					applied.Add(1)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(1), applied.Load())
		require.Equal(t, int64(1500), balance("acct", "usd"))

		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "credits", Amount: 7, ID: "pay-1"})
		require.NoError(t, err)
		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "other", Resource: "gpt-4o", Limit: "usd", Amount: 9, ID: "pay-1"})
		require.NoError(t, err)
		require.Equal(t, int64(7), balance("acct", "credits"))
		require.Equal(t, int64(9), balance("other", "usd"))
		require.Equal(t, int64(1500), balance("acct", "usd"))

		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: store.DefaultPrepaidCapacity, ID: "pay-3"})
		require.ErrorIs(t, err, limiter.ErrValidation, "over the capacity")
		require.Equal(t, int64(1500), balance("acct", "usd"))
		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "rpm", Amount: 1, ID: "pay-4"})
		require.ErrorIs(t, err, limiter.ErrValidation, "not a prepaid limit")
		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 0, ID: "pay-5"})
		require.ErrorIs(t, err, limiter.ErrValidation)
	})
}

// TestPrepaidConcurrentNeverBelowInFlight: 8 workers acquire estimates
// from a prepaid balance and commit actuals at most their estimates while
// top-ups arrive; an observer reads the balance throughout. The balance
// is never below zero, the bound −(estimates in flight) holds a fortiori,
// and it ends at the top-ups less the actuals, exactly.
func TestPrepaidConcurrentNeverBelowInFlight(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.Prepaid("usd")}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 2000, ID: "seed"})
		require.NoError(t, err)
		var toppedUp, spent, inFlight atomic.Int64
		toppedUp.Store(2000)

		const workers, rounds = 8, 15
		var wg sync.WaitGroup
		done := make(chan struct{})
		var minSeen atomic.Int64
		minSeen.Store(1 << 62)
		observeErr := make(chan error, 1)
		go func() {
			defer close(observeErr)
			for {
				select {
				case <-done:
					return
				default:
				}
				flight := inFlight.Load()
				avail, err := rl.Available(ctx, "acct", "gpt-4o")
				if err != nil {
					observeErr <- err
					return
				}
				if avail["usd"] < -flight {
					observeErr <- fmt.Errorf("balance %d below -(estimates in flight) %d", avail["usd"], -flight)
					return
				}
				for {
					m := minSeen.Load()
					if avail["usd"] >= m || minSeen.CompareAndSwap(m, avail["usd"]) {
						break
					}
				}
			}
		}()
		errs := make([]error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					estimate := int64(50 + 10*((w+i)%5))
					actual := estimate - int64(w*7+i)%estimate
					lease, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"usd": estimate})
					if err != nil {
						if i%3 == 0 {
							id := fmt.Sprintf("w%d-r%d", w, i)
							if res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 300, ID: id}); err != nil {
								errs[w] = err
								return
							} else if res.Applied {
								toppedUp.Add(300)
							}
						}
						continue
					}
					inFlight.Add(estimate)
					if err := lease.Adjust(limiter.Consume{"usd": actual - estimate}); err != nil {
						errs[w] = err
						return
					}
					if err := lease.Commit(ctx); err != nil {
						errs[w] = err
						return
					}
					inFlight.Add(-estimate)
					spent.Add(actual)
				}
			}()
		}
		wg.Wait()
		close(done)
		require.NoError(t, <-observeErr)
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.GreaterOrEqual(t, minSeen.Load(), int64(0), "actuals never exceed estimates: the balance never goes below zero")
		avail, err := rl.Available(ctx, "acct", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, toppedUp.Load()-spent.Load(), avail["usd"])
		require.Greater(t, spent.Load(), int64(0))
	})
}

// TestPrepaidStoredConfig: a prepaid limit stored with SetLimits reads back
// equal on every backend, and on DynamoDB the config item holds ra 0 and
// rp −4 (which the original refuses: "refill_amount must be positive"),
// the balance bucket is an ordinary bucket item on gpt-4o/usd.balance
// whose limit refills one token a century, and the top-up's record lies in
// the entity's partition under #TOPUP#.
func TestPrepaidStoredConfig(t *testing.T) {
	want := []limiter.Limit{limiter.PerMinute("rpm", 10), limiter.Prepaid("usd")}
	roundTrip := func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, want))
		got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"})
		require.NoError(t, err)
		require.ElementsMatch(t, want, got)
		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "proj", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		lease, err := rl.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 400})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
	}
	t.Run("memory", func(t *testing.T) { roundTrip(t, memorystore.New()) })
	t.Run("redis", func(t *testing.T) { roundTrip(t, openRedis(t)) })
	t.Run("dynamodb", func(t *testing.T) {
		repo, client, table := openDynamoDBTable(t)
		roundTrip(t, repo)
		scan := func(sk string) map[string]types.AttributeValue {
			out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table),
				FilterExpression: aws.String("begins_with(SK, :sk)"), ExpressionAttributeValues: map[string]types.AttributeValue{
					":sk": &types.AttributeValueMemberS{Value: sk}}})
			require.NoError(t, err)
			require.Len(t, out.Items, 1)
			return out.Items[0]
		}
		cfg := scan("#CONFIG#gpt-4o")
		require.Equal(t, &types.AttributeValueMemberN{Value: "1000000000000000"}, cfg["l_usd_cp"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "0"}, cfg["l_usd_ra"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "-4"}, cfg["l_usd_rp"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "10"}, cfg["l_rpm_cp"])

		out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table),
			FilterExpression: aws.String("#r = :r"), ExpressionAttributeNames: map[string]string{"#r": "resource"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: "gpt-4o/usd.balance"}}})
		require.NoError(t, err)
		require.Len(t, out.Items, 1)
		b := out.Items[0]
		require.Equal(t, &types.AttributeValueMemberN{Value: "9223372036854775000"}, b["b_usd_cp"], "the largest capacity")
		require.Equal(t, &types.AttributeValueMemberN{Value: "1000"}, b["b_usd_ra"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "3155760000000"}, b["b_usd_rp"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "600000"}, b["b_usd_tk"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "400000"}, b["b_usd_tc"])

		rec := scan("#TOPUP#")
		require.Equal(t, &types.AttributeValueMemberS{Value: "#TOPUP#gpt-4o#usd#pay-1"}, rec["SK"])
		require.Equal(t, &types.AttributeValueMemberN{Value: "1000"}, rec["amount"])
		require.Equal(t, &types.AttributeValueMemberS{Value: "usd"}, rec["limit_name"])
	})
}
