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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return limiter.New(repo, limiter.WithSpeculativeWrites(!s.NoSpeculative)), rec, meter, client, table
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
		if err != nil {
			t.Fatal(err)
		}
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
				if err != nil {
					t.Fatal(err)
				}
				sums[strings.TrimSuffix(name, "_tc")] += n
			}
		}
	}
	return sums
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
			if err := s.Resolve(); err != nil {
				t.Fatal(err)
			}
			rl, rec, meter, client, table := openTable(t, s)
			ctx := context.Background()
			if err := Setup(ctx, rl, s); err != nil {
				t.Fatal(err)
			}
			ticks := 0
			err := Run(ctx, rl, meter, rec, s, RunOptions{TickInterval: 500 * time.Millisecond, Tick: func(time.Duration, *Result) { ticks++ }})
			if err != nil {
				t.Fatal(err)
			}
			r := rec.Result()
			if r.Failed != 0 {
				t.Fatalf("%d failed acquires: %v", r.Failed, r.Errors)
			}
			if r.Admitted == 0 || r.Denied == 0 {
				t.Fatalf("admitted %d, denied %d: the scenario must both admit and deny", r.Admitted, r.Denied)
			}
			if ticks < 3 {
				t.Errorf("%d progress ticks in a 2 s run at 500 ms", ticks)
			}
			if r.Consumed["rpm"] != int64(r.Admitted) {
				t.Errorf("consumed rpm %d, admitted %d", r.Consumed["rpm"], r.Admitted)
			}
			if got := r.Acquire.Count(); got != r.Admitted+r.Denied {
				t.Errorf("acquire histogram holds %d, want %d", got, r.Admitted+r.Denied)
			}
			var inSeries uint64
			for _, sec := range r.Series {
				inSeries += sec.Admitted + sec.Denied + sec.Failed
			}
			if inSeries != r.Acquires() {
				t.Errorf("series holds %d acquires, want %d", inSeries, r.Acquires())
			}
			if s.Rate > 0 {
				if max := s.Rate*time.Duration(s.Duration).Seconds() + 1; float64(r.Acquires()) > max {
					t.Errorf("%d acquires at rate %.0f for %v: more than %.0f", r.Acquires(), s.Rate, time.Duration(s.Duration), max)
				}
			}

			entities := tableConsumption(t, client, table, s.Prefix+"-key-")
			for _, name := range []string{"rpm", "tpm"} {
				if want := r.Consumed[name] * 1000; entities[name] != want {
					t.Errorf("entity buckets: %s consumption counters sum to %d millitokens, the admitted leases consumed %d", name, entities[name], want)
				}
			}
			if s.Cascade {
				parents := tableConsumption(t, client, table, s.Prefix+"-project-")
				for _, name := range []string{"rpm", "tpm"} {
					if want := r.Consumed[name] * 1000; parents[name] != want {
						t.Errorf("parent buckets: %s counters sum to %d, want %d", name, parents[name], want)
					}
				}
			}
			c := r.Capacity(true)
			if c.Calls == 0 || !c.Known() || c.WCU <= 0 || r.Ops["UpdateItem"] == nil {
				t.Errorf("calls %+v, capacity %+v", r.Ops, c)
			}

			var text bytes.Buffer
			if err := WriteText(&text, r, true, DefaultPrices); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"acquire latency  p50", "admitted", "UpdateItem", "per million acquires"} {
				if !strings.Contains(text.String(), want) {
					t.Errorf("text report lacks %q:\n%s", want, text.String())
				}
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
	if err := WriteHTML(&buf, r, true, DefaultPrices); err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatalf("the report is not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			count[el.Name.Local]++
			for _, a := range el.Attr {
				if a.Name.Local == "id" {
					ids[a.Value] = true
					inResult = a.Value == "result"
				}
				if a.Name.Local == "href" || a.Name.Local == "src" {
					t.Errorf("the report links %s=%q: it must be self-contained", a.Name.Local, a.Value)
				}
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
		if !ids[id] {
			t.Errorf("report has no element #%s", id)
		}
	}
	if count["svg"] != 3 || count["polyline"] != 6 || count["rect"] < 10 {
		t.Errorf("svg %d, polyline %d, rect %d: want 3 charts, 6 lines and histogram bars", count["svg"], count["polyline"], count["rect"])
	}
	var back Result
	if err := json.Unmarshal([]byte(embedded), &back); err != nil {
		t.Fatalf("embedded result: %v", err)
	}
	if back.Admitted != r.Admitted || back.Acquire.Count() != r.Acquire.Count() {
		t.Errorf("embedded result: admitted %d, %d latencies; want %d, %d", back.Admitted, back.Acquire.Count(), r.Admitted, r.Acquire.Count())
	}
}
