package aggregator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// Defaults of [Options].
const (
	DefaultSnapshotTTL = 90 * 24 * time.Hour
	// ShardThreshold is the wcu level, as a fraction of its capacity, below
	// which shard 0 of a bucket is doubled proactively.
	ShardThreshold = 0.2
	// shardWarnCount is the shard count above which a doubling is logged
	// as a warning.
	shardWarnCount = 32
)

// DefaultWindows are the snapshot windows used when [Options.Windows] is
// empty.
var DefaultWindows = []string{store.WindowHourly, store.WindowDaily}

// DynamoDBClient is the subset of *dynamodb.Client the processor uses.
type DynamoDBClient interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// S3Client is the subset of *s3.Client the audit archiver uses.
type S3Client interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var (
	_ DynamoDBClient = (*dynamodb.Client)(nil)
	_ S3Client       = (*s3.Client)(nil)
)

// Options configures a [Processor]. Zero values mean the documented
// defaults.
type Options struct {
	// Windows are the usage-snapshot windows (store.WindowHourly,
	// WindowDaily, WindowMonthly), each written to a snapshot item of its
	// own; a type named twice counts once. Empty means [DefaultWindows].
	Windows []string
	// SnapshotTTL is how long a usage snapshot lives after its creation.
	// Zero means [DefaultSnapshotTTL]; it is stored as whole seconds.
	SnapshotTTL time.Duration
	// ArchiveBucket is the S3 bucket that receives TTL-expired audit
	// events. Archival is on when both ArchiveBucket and S3 are set.
	ArchiveBucket string
	// S3 is the client for archival.
	S3 S3Client
	// Now is the clock for refill math, snapshot TTLs and records without
	// an event time. Nil means time.Now.
	Now func() time.Time
	// Logger receives one line per batch with failures or errors, and one
	// per error. Nil discards.
	Logger *slog.Logger
}

// Processor applies DynamoDB stream batches of a rate-limiter table: usage
// snapshots, proactive refill, proactive sharding, shard propagation and
// audit archival. It is safe for concurrent use; batches of different
// stream shards may be processed concurrently. Create it with
// [NewProcessor].
type Processor struct {
	client DynamoDBClient
	table  string
	opts   Options
}

// NewProcessor returns a processor writing to table through client. An
// unknown window, a negative TTL, an empty table name or a nil client is an
// error.
func NewProcessor(client DynamoDBClient, table string, optFns ...func(*Options)) (*Processor, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	if len(o.Windows) == 0 {
		o.Windows = DefaultWindows
	}
	// A window type named twice is kept once: each type is one snapshot
	// item, counted once.
	windows := make([]string, 0, len(o.Windows))
	for _, w := range o.Windows {
		if _, err := ddbschema.WindowStart(w, time.Time{}); err != nil {
			return nil, fmt.Errorf("aggregator: %w", err)
		}
		if !slices.Contains(windows, w) {
			windows = append(windows, w)
		}
	}
	o.Windows = windows
	switch {
	case o.SnapshotTTL < 0:
		return nil, fmt.Errorf("aggregator: negative snapshot TTL %v", o.SnapshotTTL)
	case o.SnapshotTTL == 0:
		o.SnapshotTTL = DefaultSnapshotTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if table == "" {
		return nil, errors.New("aggregator: empty table name")
	}
	if client == nil {
		return nil, errors.New("aggregator: nil DynamoDB client")
	}
	return &Processor{client: client, table: table, opts: o}, nil
}

// Table returns the table the processor writes to.
func (p *Processor) Table() string { return p.table }

// Result is the outcome of one batch.
type Result struct {
	// Processed is the number of records in the batch.
	Processed int
	// SnapshotsUpdated counts usage-snapshot writes (one per entity,
	// resource and window, see the package documentation).
	SnapshotsUpdated int
	// RefillsWritten counts proactive refills that applied.
	RefillsWritten int
	// ShardsDoubled counts proactive shard doublings that applied.
	ShardsDoubled int
	// ShardItemsCreated counts shard items created by propagation.
	ShardItemsCreated int
	// EventsArchived and ObjectsCreated count archived audit events and the
	// S3 objects holding them.
	EventsArchived int
	ObjectsCreated int
	// Failures lists, in batch order, the records to redeliver: the first
	// record that failed and every record after it. Empty when the batch
	// succeeded.
	Failures []Failure
	// Errors holds failures of best-effort steps (refill, sharding) that do
	// not ask for redelivery.
	Errors []error
}

// Failure is a record that must be redelivered.
type Failure struct {
	// EventID and SequenceNumber identify the record.
	EventID        string
	SequenceNumber string
	// Err says why; it matches [ErrMalformedRecord], [ErrNotApplied] or
	// wraps a DynamoDB or S3 error.
	Err error
}

// Process applies one batch of stream records (in stream order) and
// reports the records to redeliver. requestID names the archive object
// (the Lambda request id). It never panics on malformed input.
//
// The steps run in an order that keeps usage counters exact when a step
// fails: everything that is idempotent or retried as a whole (shard
// propagation, archival) runs before the snapshot writes, each of which
// covers whole records and applies atomically; a failure cuts the batch
// there, and only the records before the cut are counted. See the package
// documentation.
func (p *Processor) Process(ctx context.Context, records []events.DynamoDBEventRecord, requestID string) Result {
	now := p.opts.Now()
	res := Result{Processed: len(records)}
	failAt, failErr := len(records), error(nil)
	fail := func(i int, err error) {
		if i < failAt {
			failAt, failErr = i, err
		}
	}
	// before returns the records of recs before the cut.
	before := func(recs []record) []record {
		n := 0
		for n < len(recs) && recs[n].index < failAt {
			n++
		}
		return recs[:n]
	}

	// 1. Decode; the batch is cut at the first record that cannot be decoded.
	decoded := make([]record, 0, len(records))
	for i, rec := range records {
		r, err := decodeRecord(i, rec, now)
		if err != nil {
			fail(i, err)
			break
		}
		decoded = append(decoded, r)
	}

	// 2. Shard propagation: idempotent, so a record redelivered after a
	// later failure does no harm.
	for _, r := range decoded {
		n, err := p.propagate(ctx, r)
		res.ShardItemsCreated += n
		if err != nil {
			fail(r.index, err)
			break
		}
	}
	decoded = before(decoded)

	// 3. Audit archival: one object for the batch, all or nothing.
	if p.opts.S3 != nil && p.opts.ArchiveBucket != "" {
		if evs, first := auditEvents(decoded); len(evs) > 0 {
			if err := p.archive(ctx, evs, requestID, now); err != nil {
				fail(first, err)
			} else {
				res.EventsArchived += len(evs)
				res.ObjectsCreated++
			}
		}
	}
	decoded = before(decoded)

	// 4. Usage snapshots, in atomic chunks of whole records.
	for _, c := range p.snapshotChunks(decoded) {
		if err := p.writeChunk(ctx, c, now); err != nil {
			fail(c.start, err)
			break
		}
		res.SnapshotsUpdated += len(c.groups)
	}
	decoded = before(decoded)

	// 5. Proactive refill and sharding (best effort: the next batch or the
	// client's slow path does the same work).
	for _, b := range aggregateBuckets(decoded) {
		credits := refillCredits(b, now.UnixMilli())
		if shouldShard(b, now.UnixMilli()) {
			ok, err := p.proactiveShard(ctx, b, credits, now)
			if err != nil {
				res.Errors = append(res.Errors, err)
			} else if ok {
				res.ShardsDoubled++
			}
			continue
		}
		ok, err := p.refill(ctx, b, credits, now)
		if err != nil {
			res.Errors = append(res.Errors, err)
		} else if ok {
			res.RefillsWritten++
		}
	}

	for i := failAt; i < len(records); i++ {
		err := failErr
		if i > failAt {
			err = fmt.Errorf("%w (event %q)", ErrNotApplied, records[failAt].EventID)
		}
		res.Failures = append(res.Failures, Failure{EventID: records[i].EventID, SequenceNumber: records[i].Change.SequenceNumber, Err: err})
	}
	p.log(ctx, res)
	return res
}

func (p *Processor) log(ctx context.Context, res Result) {
	for _, err := range res.Errors {
		p.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "best-effort step failed", slog.String("error", err.Error()))
	}
	if len(res.Failures) > 0 {
		p.opts.Logger.LogAttrs(ctx, slog.LevelError, "records to redeliver",
			slog.Int("count", len(res.Failures)),
			slog.String("first_event_id", res.Failures[0].EventID),
			slog.String("error", res.Failures[0].Err.Error()))
	}
	p.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "batch processed",
		slog.Int("processed", res.Processed),
		slog.Int("snapshots_updated", res.SnapshotsUpdated),
		slog.Int("refills_written", res.RefillsWritten),
		slog.Int("shards_doubled", res.ShardsDoubled),
		slog.Int("shard_items_created", res.ShardItemsCreated),
		slog.Int("events_archived", res.EventsArchived),
		slog.Int("failures", len(res.Failures)))
}

// Handle is the Lambda handler: it processes the event's records and
// returns the records to redeliver as BatchItemFailures, identified by
// their sequence numbers (the event source mapping needs
// FunctionResponseTypes ReportBatchItemFailures). It never returns an
// error: an error would make the event source mapping redeliver the whole
// batch, counting again the records that were applied. When ctx ends
// during the batch, the writes it stops fail and their records are
// reported like any other failure.
func (p *Processor) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	requestID := "local"
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		requestID = lc.AwsRequestID
	}
	res := p.Process(ctx, ev.Records, requestID)
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	for _, f := range res.Failures {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: f.SequenceNumber})
	}
	return resp, nil
}
