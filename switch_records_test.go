package limiter

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestSwitchRecordsKeepForeignAttributes: the switch records that
// DeleteResourceDefaults and DeleteLimits of DefaultResource add to the
// system config are written with an UpdateItem of their attribute alone
// (conditioned on the records read), on DynamoDB Local: an attribute
// another tool keeps on the system config's item (the Python library, an
// operator's note) survives both, and so do the limits and mode.
func TestSwitchRecordsKeepForeignAttributes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	defer rl.Close()
	ctx := env.ctx
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	require.NoError(t, rl.SetSystemDefaults(ctx, []Limit{PerCalendarDay("usd", 1000).InLocation(kiritimati)}, OnUnavailableBlock))
	require.NoError(t, rl.SetResourceDefaults(ctx, "gpt", []Limit{PerCalendarDay("usd", 1000)}))
	require.NoError(t, rl.SetLimits(ctx, "e1", DefaultResource, []Limit{PerDay("usd", 500)}))

	sysKey := primaryKey(pkSystem(env.repo.NamespaceID()), skConfig(""))
	_, err = env.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(env.repo.Table()), Key: sysKey,
		UpdateExpression:          aws.String("SET operator_note = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "kept"}},
	})
	require.NoError(t, err)
	foreign := func() string {
		t.Helper()
		v, ok := schemaGetS(env.item(pkSystem(env.repo.NamespaceID()), skConfig("")), "operator_note")
		require.True(t, ok, "the foreign attribute is gone")
		return v
	}

	env.rec.Reset()
	require.NoError(t, rl.DeleteResourceDefaults(ctx, "gpt"))
	calls := env.calls()
	require.Equal(t, "kept", foreign())
	// The config read and deleted, the registry, the system config read
	// and its records updated, the audit event put.
	require.Equal(t, "GetItem, DeleteItem, UpdateItem, GetItem, UpdateItem, PutItem", calls)
	c, ok, err := env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, c.Switches, 1, "the switch of gpt's entities from UTC to Kiritimati")
	require.Equal(t, "gpt", c.Switches[0].Resource)
	require.Equal(t, PerCalendarDay("usd", 1000), c.Switches[0].From)

	require.NoError(t, rl.DeleteLimits(ctx, "e1", DefaultResource))
	require.Equal(t, "kept", foreign())
	c, _, err = env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.Len(t, c.Switches, 2)
	require.Equal(t, "e1", c.Switches[1].Entity)
	require.Equal(t, OnUnavailableBlock, c.OnUnavailable)
	require.Len(t, c.Limits, 1)
	require.Equal(t, "Pacific/Kiritimati", c.Limits[0].LocationName())

	// A write conditioned on records that are no longer there writes
	// nothing.
	done, err := env.repo.SetConfigSwitches(ctx, store.SystemConfig(), c.Switches[:1], nil)
	require.NoError(t, err)
	require.False(t, done)
	done, err = env.repo.SetConfigSwitches(ctx, store.SystemConfig(), c.Switches, nil)
	require.NoError(t, err)
	require.True(t, done)
	item := env.item(pkSystem(env.repo.NamespaceID()), skConfig(""))
	require.NotContains(t, item, attrLimitSwitches)
	require.Equal(t, "kept", foreign())
}
