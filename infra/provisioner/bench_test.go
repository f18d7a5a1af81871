package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// BenchmarkChange measures one change of the provisioner against DynamoDB
// Local: an entity's limits on a resource stored by a Create, or deleted
// by a Delete, of a manifest of b.N of them. provisioner.ChangeCost is
// this measurement, rounded up:
//
//	go test -run XXX -bench Change ./infra/provisioner
func BenchmarkChange(b *testing.B) {
	for _, op := range []string{"store", "delete"} {
		b.Run(op, func(b *testing.B) {
			ctx := context.Background()
			var rec ddblocal.Recorder
			client := ddblocal.Client(b, rec.Option())
			table := ddblocal.TableName(b)
			_, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
				o.Table, o.Namespace, o.CreateTable = table, "tenant-a", true
			})
			require.NoError(b, err)
			entities := map[string]any{}
			for i := range b.N {
				entities[fmt.Sprintf("key-%d", i)] = map[string]any{"Resources": map[string]any{
					"gpt-4o": map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": "10"}}}}}
			}
			ev := cfn.Event{RequestType: cfn.RequestCreate, ResourceType: provisioner.ResourceType, RequestID: "bench",
				ResourceProperties: map[string]any{"TableName": table, "Namespace": "tenant-a", "Entities": entities}}
			h := &provisioner.Handler{Client: client}
			if op == "delete" {
				_, _, err := h.Handle(ctx, ev)
				require.NoError(b, err)
				ev.RequestType, ev.PhysicalResourceID = cfn.RequestDelete, provisioner.PhysicalID(table, "tenant-a")
			}
			rec.Reset()
			b.ResetTimer()
			_, data, err := h.Handle(ctx, ev)
			b.StopTimer()
			require.NoError(b, err)
			key := map[string]string{"store": "Stored", "delete": "Deleted"}[op]
			require.EqualValues(b, b.N, data[key])
			b.ReportMetric(float64(len(rec.Calls()))/float64(b.N), "requests/change")
		})
	}
}
