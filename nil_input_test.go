package limiter_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestNewNilRepository: New panics at once with a message naming the
// repository, for a nil interface and for a nil pointer of a repository
// type (a failed OpenDynamoDB whose error was not checked).
func TestNewNilRepository(t *testing.T) {
	assert.PanicsWithValue(t, "limiter: New: nil repository (<nil>)", func() { limiter.New(nil) })
	var repo *limiter.DynamoDBRepository
	assert.PanicsWithValue(t, "limiter: New: nil repository (*limiter.DynamoDBRepository)", func() { limiter.New(repo) })
	var mem *memorystore.Store
	assert.PanicsWithValue(t, "limiter: New: nil repository (*memorystore.Store)", func() { limiter.New(mem) })
}

// TestNewSkipsNilOptions: a nil Option is skipped; the options around it
// apply.
func TestNewSkipsNilOptions(t *testing.T) {
	var none func(*limiter.Options)
	rl := limiter.New(memorystore.New(), none, func(o *limiter.Options) { o.SpeculativeWrites = false }, nil)
	t.Cleanup(func() { _ = rl.Close() })
	lease, err := rl.Acquire(context.Background(), "key-1", "chat", limiter.Consume{"rpm": 1},
		limiter.WithLimits(limiter.PerMinute("rpm", 10)))
	require.NoError(t, err)
	require.NoError(t, lease.Commit(context.Background()))
}

// TestNilInputsRefused: nil options, functions, contexts and leases are
// refused with a *ValidationError that names the argument, before any
// write.
func TestNilInputsRefused(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	t.Cleanup(func() { _ = rl.Close() })
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 10))
	one := limiter.Consume{"rpm": 1}

	field := func(t *testing.T, err error) string {
		t.Helper()
		require.ErrorIs(t, err, limiter.ErrValidation)
		var ve *limiter.ValidationError
		require.ErrorAs(t, err, &ve)
		return ve.Field
	}

	_, err := rl.Acquire(ctx, "key-1", "chat", one, lim, nil)
	assert.Equal(t, "opts", field(t, err))
	assert.EqualError(t, err, "limiter: invalid opts: opts[1] is a nil AcquireOption")
	_, err = rl.Wait(ctx, "key-1", "chat", one, nil)
	assert.Equal(t, "opts", field(t, err))
	_, err = rl.Available(ctx, "key-1", "chat", nil)
	assert.Equal(t, "opts", field(t, err))
	_, err = rl.TimeUntilAvailable(ctx, "key-1", "chat", one, lim, nil)
	assert.Equal(t, "opts", field(t, err))
	_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "key-1", Resource: "chat", Consume: one}}, nil)
	assert.Equal(t, "opts", field(t, err))
	err = rl.Do(ctx, "key-1", "chat", one, nil, lim)
	assert.Equal(t, "fn", field(t, err))

	var nilCtx context.Context
	_, err = rl.Available(nilCtx, "key-1", "chat", lim)
	assert.Equal(t, "ctx", field(t, err))
	_, err = rl.TimeUntilAvailable(nilCtx, "key-1", "chat", one, lim)
	assert.Equal(t, "ctx", field(t, err))
	_, _, err = rl.Admin().ResolveLimits(nilCtx, "key-1", "chat")
	assert.Equal(t, "ctx", field(t, err))
	_, err = rl.LimitsInForce(nilCtx, "key-1", "chat")
	assert.Equal(t, "ctx", field(t, err))

	// Nothing was taken by the refused calls.
	avail, err := rl.Available(ctx, "key-1", "chat", lim)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"rpm": 10}, avail)

	// The nil lease of a failed Acquire.
	lease, err := rl.Acquire(ctx, "key-1", "chat", limiter.Consume{"rpm": 11}, lim)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
	require.Nil(t, lease)
	assert.Equal(t, "lease", field(t, lease.Commit(ctx)))
	assert.Equal(t, "lease", field(t, lease.Rollback(ctx)))
	assert.Equal(t, "lease", field(t, lease.Adjust(one)))
	assert.Equal(t, "lease", field(t, lease.Consume(one)))
	assert.Equal(t, "lease", field(t, lease.Release(one)))
	assert.Empty(t, lease.Consumed())
	assert.Empty(t, lease.Statuses())
	assert.False(t, lease.FailedOpen())
}

// TestOpenDynamoDBNilInputs: a nil context or client is a
// *ValidationError naming it, before any call; a nil option function is
// skipped.
func TestOpenDynamoDBNilInputs(t *testing.T) {
	var nilCtx context.Context
	_, err := limiter.OpenDynamoDB(nilCtx, limiter.NewDynamoDBLocalClient("http://127.0.0.1:1"))
	var ve *limiter.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "ctx", ve.Field)
	var client *dynamodb.Client
	_, err = limiter.OpenDynamoDB(context.Background(), client)
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "client", ve.Field)
	_, err = limiter.OpenDynamoDB(context.Background(), nil)
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "client", ve.Field)

	// The nil option is skipped and the next one applies: its invalid
	// table name is refused before any call.
	_, err = limiter.OpenDynamoDB(context.Background(), limiter.NewDynamoDBLocalClient("http://127.0.0.1:1"), nil,
		func(o *limiter.DynamoDBOptions) { o.Table = "not a table name!" }, nil)
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "name", ve.Field)
}
