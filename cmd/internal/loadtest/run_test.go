package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

func TestMain(m *testing.M) { ddblocalMain(m) }

// openTable opens a fresh table and a limiter whose client is metered by
// a recorder of a new result.
func openTable(t *testing.T, s Scenario) (*limiter.RateLimiter, *Recorder, *CallMeter, *dynamodb.Client, string) {
	t.Helper()
	res := NewResult()
	res.Scenario = s
	rec := NewRecorder(res)
	meter := NewCallMeter(rec)
	client := ddblocal.Client(t, meter.Option())
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(context.Background(), client, func(o *limiter.DynamoDBOptions) {
		o.Table = table
		o.Namespace = "default"
		o.CreateTable = true
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return limiter.New(repo, func(o *limiter.Options) { o.SpeculativeWrites = !s.NoSpeculative }), rec, meter, client, table
}

// tableConsumption sums the consumption counters (b_L_tc, millitokens) of
// every bucket item (all shards) of the entities whose ids start with
// prefix, per limit name.
func tableConsumption(t *testing.T, client *dynamodb.Client, table, prefix string) map[string]int64 {
	t.Helper()
	sums := map[string]int64{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, item := range page.Items {
			id, ok := item["entity_id"].(*types.AttributeValueMemberS)
			if _, bucket := item["rf"]; !ok || !bucket || !strings.HasPrefix(id.Value, prefix) {
				continue
			}
			for attr, v := range item {
				name, ok := strings.CutPrefix(attr, "b_")
				if !ok || !strings.HasSuffix(name, "_tc") {
					continue
				}
				n, err := strconv.ParseInt(v.(*types.AttributeValueMemberN).Value, 10, 64)
				require.NoError(t, err)
				sums[strings.TrimSuffix(name, "_tc")] += n
			}
		}
	}
	return sums
}

// assertKeptFraction checks a tpm consumption counter (millitokens)
// against the whole tokens the admitted leases report: at least that, and
// less than one token more per lease.
func assertKeptFraction(t *testing.T, where string, reported, counter, leases int64) {
	t.Helper()
	assert.GreaterOrEqual(t, counter, reported*1000, "%s: tpm consumption counters (millitokens) against what the admitted leases report", where)
	assert.Less(t, counter-reported*1000, leases*1000, "%s: tpm kept beyond the whole tokens reported, for %d leases", where, leases)
}

// TestRunMatchesTable runs short scenarios against DynamoDB Local: every
// acquire is counted once, the buckets' consumption counters equal what the
// admitted leases consumed (on the entities and, with cascade, on their
// parents), limits deny some acquires, and the DynamoDB calls with their
// consumed capacity are recorded.
func TestRunMatchesTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Scenario
	}{
		// Limits low enough that a few acquires are denied, however slow
		// the machine: 2 entities at 1 rpm, 2 parents at 1 rpm.
		{"per-call limits, hot key", Scenario{Entities: 2, HotKeys: 1, HotShare: 0.7, RPM: 1, TPM: 100_000,
			TokensEstimate: 500, TokensActual: [2]int64{200, 900}, Concurrency: 4, Duration: Duration(2 * time.Second), Seed: 7}},
		{"cascade, stored limits, paced", Scenario{Entities: 8, Cascade: true, Parents: 2, RPM: 15, TPM: 100_000, ParentRPM: 1,
			TokensEstimate: 400, TokensActual: [2]int64{100, 800}, Concurrency: 4, Duration: Duration(2 * time.Second), Rate: 150, Seed: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.Prefix = "lt" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
			require.NoError(t, s.Resolve())
			rl, rec, meter, client, table := openTable(t, s)
			ctx := context.Background()
			require.NoError(t, Setup(ctx, rl, s))
			ticks := 0
			err := Run(ctx, rl, meter, rec, s, RunOptions{TickInterval: 500 * time.Millisecond, Tick: func(time.Duration, *Result) { ticks++ }})
			require.NoError(t, err)
			r := rec.Result()
			require.Zero(t, r.Failed, "failed acquires: %v", r.Errors)
			require.Positive(t, r.Admitted, "admitted: the scenario must both admit and deny")
			require.Positive(t, r.Denied, "denied: the scenario must both admit and deny")
			assert.GreaterOrEqual(t, ticks, 3, "progress ticks in a 2 s run at 500 ms")
			assert.Equal(t, int64(r.Admitted), r.Consumed["rpm"], "consumed rpm against admitted")
			assert.Equal(t, r.Admitted+r.Denied, r.Acquire.Count(), "acquires in the histogram")
			var inSeries uint64
			for _, sec := range r.Series {
				inSeries += sec.Admitted + sec.Denied + sec.Failed
			}
			assert.Equal(t, r.Acquires(), inSeries, "acquires in the series")
			if s.Rate > 0 {
				limit := s.Rate*time.Duration(s.Duration).Seconds() + 1
				assert.LessOrEqual(t, float64(r.Acquires()), limit, "acquires at rate %.0f for %v", s.Rate, time.Duration(s.Duration))
			}

			// rpm is never refunded here: its counters are exact. A tpm
			// refund is cut by the refill while the lease was held, in
			// millitokens, and a lease reports what it keeps in whole
			// tokens, rounded down: each admitted lease may keep less than
			// one token more on each bucket than it reports.
			entities := tableConsumption(t, client, table, s.Prefix+"-key-")
			assert.Equal(t, r.Consumed["rpm"]*1000, entities["rpm"], "entity buckets: rpm consumption counters (millitokens) against what the admitted leases consumed")
			assertKeptFraction(t, "entity buckets", r.Consumed["tpm"], entities["tpm"], int64(r.Admitted))
			if s.Cascade {
				parents := tableConsumption(t, client, table, s.Prefix+"-project-")
				assert.Equal(t, r.ParentConsumed["rpm"]*1000, parents["rpm"], "parent buckets: rpm consumption counters")
				assertKeptFraction(t, "parent buckets", r.ParentConsumed["tpm"], parents["tpm"], int64(r.Admitted))
			}
			c := r.Capacity(true)
			assert.Positive(t, c.Calls, "capacity %+v", c)
			assert.True(t, c.Known(), "capacity %+v, want known", c)
			assert.Positive(t, c.WCU, "capacity %+v", c)
			assert.Contains(t, r.Ops, "UpdateItem")

			var text bytes.Buffer
			require.NoError(t, WriteText(&text, r, true, DefaultPrices))
			for _, want := range []string{"acquire latency  p50", "admitted", "UpdateItem", "per million acquires"} {
				assert.Contains(t, text.String(), want, "text report")
			}
			checkHTML(t, r)
		})
	}
}

// checkHTML writes r's HTML report and checks that it parses as XML, has
// the three charts with their lines and bars, and embeds r.
func checkHTML(t *testing.T, r *Result) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, r, true, DefaultPrices))
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.Strict = true
	count := map[string]int{}
	ids := map[string]bool{}
	var embedded string
	inResult := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the report is not well-formed")
		switch el := tok.(type) {
		case xml.StartElement:
			count[el.Name.Local]++
			for _, a := range el.Attr {
				if a.Name.Local == "id" {
					ids[a.Value] = true
					inResult = a.Value == "result"
				}
				assert.NotContains(t, []string{"href", "src"}, a.Name.Local, "the report links %q: it must be self-contained", a.Value)
			}
		case xml.CharData:
			if inResult {
				embedded += string(el)
			}
		case xml.EndElement:
			inResult = false
		}
	}
	for _, id := range []string{"throughput", "latency-over-time", "histogram", "outcomes", "latency", "calls", "cost", "result"} {
		assert.True(t, ids[id], "report has no element #%s", id)
	}
	assert.Equal(t, 3, count["svg"], "charts")
	assert.Equal(t, 6, count["polyline"], "lines")
	assert.GreaterOrEqual(t, count["rect"], 10, "histogram bars")
	var back Result
	require.NoError(t, json.Unmarshal([]byte(embedded), &back), "embedded result")
	assert.Equal(t, r.Admitted, back.Admitted, "embedded result")
	assert.Equal(t, r.Acquire.Count(), back.Acquire.Count(), "embedded result")
}
