// Layer 5, the DynamoDB repository: DynamoDBRepository, its options and
// client, version checks and error mapping.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// Defaults of [DynamoDBOptions]: the table and the namespace, which
// $ZAEL_STACK and $ZAEL_NAMESPACE override.
const (
	DefaultTable     = "zae-limiter"
	DefaultNamespace = "default"
)

// Defaults of [DynamoDBOptions]' caches and bounds.
const (
	defaultNamespaceCacheSize = 1000
	defaultNamespaceCacheTTL  = 10 * time.Minute
	defaultOpenTimeout        = 5 * time.Second
	defaultBucketCacheSize    = 4096
)

// DynamoDBClient is the subset of *dynamodb.Client the repository uses.
type DynamoDBClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var (
	_ DynamoDBClient          = (*dynamodb.Client)(nil)
	_ Repository              = (*dynamoRepository)(nil)
	_ store.SpeculativeStore  = (*dynamoRepository)(nil)
	_ store.ShardStore        = (*dynamoRepository)(nil)
	_ store.AuditLog          = (*dynamoRepository)(nil)
	_ store.ConfigLister      = (*dynamoRepository)(nil)
	_ store.UsageStore        = (*dynamoRepository)(nil)
	_ store.CapacityReader    = (*dynamoRepository)(nil)
	_ store.NamespaceRegistry = (*dynamoRepository)(nil)
)

// DynamoDBOptions configures [OpenDynamoDB]. OpenDynamoDB fills every field
// with its default before calling the option functions, so setting a field
// to zero is meaningful where documented. The limiter's own settings (config
// cache, bucket TTLs, audit principal and retention) are options of [New].
type DynamoDBOptions struct {
	// Table is the table (and CloudFormation stack) name. Default:
	// $ZAEL_STACK, else "zae-limiter".
	Table string
	// Namespace is the namespace name; it is registered on first use.
	// Default: $ZAEL_NAMESPACE, else "default".
	Namespace string
	// CreateTable creates the table (with TTL enabled) when it does not
	// exist: a development convenience; production tables come from the
	// shipped template.
	CreateTable bool
	// Now is the clock of the namespace registry and version records, and
	// of the namespace cache. Nil means time.Now.
	Now func() time.Time
	// NamespaceCacheSize bounds the namespace name → id cache that the
	// repository shares with the ones [DynamoDBRepository.Namespace]
	// returns: the least recently used name goes first. Zero means
	// the default, 1,000.
	NamespaceCacheSize int
	// NamespaceCacheTTL is how long a namespace's id is trusted after it
	// was read: past it, [DynamoDBRepository.Namespace] reads the registry
	// again, and so sees a namespace another process deleted. Zero means
	// the default, 10 minutes.
	NamespaceCacheTTL time.Duration
	// Logger receives the repository's one warning, logged once: an index
	// query found entries of another namespace and dropped them (the
	// store behind the handle counts them: ForeignIndexItems). Nil means
	// [slog.Default].
	Logger *slog.Logger
	// Metrics, when set, is told of every such entry dropped (package
	// otelmetrics implements [IndexMetrics]).
	Metrics IndexMetrics
	// OpenTimeout bounds the requests [OpenDynamoDB] makes to check the
	// table and register the namespace, together (the wait for a table
	// that CreateTable creates to become active is not counted): an
	// endpoint that does not answer fails the open with an
	// *[UnavailableError] after about this long. (One that refuses the
	// connection fails it at once: the open does not retry a connection
	// that could not be made.) Zero means the default, 5 s, or
	// $ZAEL_STORE_TIMEOUT when that is longer.
	OpenTimeout time.Duration
	// BucketCacheSize bounds the bucket items the repository keeps as its
	// last write of each returned them (shared with the repositories
	// [DynamoDBRepository.Namespace] returns), the least recently used
	// going first. A speculative write whose bucket may have refilled to
	// its capacity writes the refilled state computed from the kept item,
	// conditioned on the item being unchanged: one write instead of a
	// refused one and the refilled one. An item not kept is read (one
	// consistent GetItem) before the first write to it, which is decided
	// from it. Zero means the default, 4,096 items (about 1.4 KiB each
	// with two limits); a negative size keeps none, and writes without
	// that read.
	BucketCacheSize int
}

// dynamoRepository is the DynamoDB store behind a [DynamoDBRepository]:
// it implements the backend contract and every optional capability of
// package store, on one namespace of one table.
type dynamoRepository struct {
	client DynamoDBClient
	opts   DynamoDBOptions
	nsID   string
	nsName string
	shared *sharedState
	// nsIDSource supplies the random bytes of new namespace ids; nil means
	// crypto/rand. A test seam.
	nsIDSource io.Reader
}

// sharedState is shared between a repository and its namespace-scoped
// siblings.
type sharedState struct {
	now   func() time.Time
	mu    sync.Mutex                 // guards nsIDs
	nsIDs *lru.Cache[string, string] // namespace name → id
	// spec and exact build the table's speculative and exact writes from
	// cached templates, adjust its adjustments.
	spec   *ddbschema.SpeculativeUpdates
	exact  *ddbschema.ExactUpdates
	adjust *adjustTemplates
	// buckets keeps the bucket items as the last write of each returned
	// them.
	buckets *bucketCache
	// log and metrics are DynamoDBOptions.Logger and Metrics; foreign
	// counts the index entries of other namespaces dropped, foreignLogged
	// whether the first was logged.
	log           *slog.Logger
	metrics       IndexMetrics
	foreign       atomic.Int64
	foreignLogged atomic.Bool
}

func newSharedState(o DynamoDBOptions) *sharedState {
	size, ttl := o.NamespaceCacheSize, o.NamespaceCacheTTL
	if size <= 0 {
		size = defaultNamespaceCacheSize
	}
	if ttl <= 0 {
		ttl = defaultNamespaceCacheTTL
	}
	buckets := o.BucketCacheSize
	if buckets == 0 {
		buckets = defaultBucketCacheSize
	}
	return &sharedState{
		now: o.Now, nsIDs: lru.New[string, string](size, ttl),
		spec: ddbschema.NewSpeculativeUpdates(o.Table), exact: ddbschema.NewExactUpdates(o.Table),
		adjust:  newAdjustTemplates(o.Table),
		buckets: newBucketCache(buckets),
		log:     o.Logger, metrics: o.Metrics,
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// DynamoDBRepository is the DynamoDB store, scoped to one namespace of one
// table: pass it to [New]. Open it with [OpenDynamoDB]. It is safe for
// concurrent use.
//
// The table's layout is that of schema 0.10.0 ([SchemaVersion]), which it
// shares with every other client of that schema: a table another client
// writes works with this one, and the other way round. Every write that
// changes a bucket's balances carries a random identifier, which the item
// keeps among those of its last four writes: the SDK's retry of a write
// that applied but was answered with a 5xx is then recognised as applied,
// so such writes are retried and charged once.
//
// Its embedded [store.Repository] and [store.NamespaceRegistry] are the
// backend contract and the table's namespace registry (package store
// documents them); [DynamoDBRepository.Unwrap] returns the store itself,
// which also implements every optional capability of package store:
// speculative writes, sharding (every bucket item carries a hidden
// write-capacity limit, its share of DynamoDB's 1000 writes per second
// per partition, and a bucket that exceeds it is spread over more items),
// the audit log, config and entity listings, usage snapshots, capacity
// sums, top-ups and the rest.
type DynamoDBRepository struct {
	store.Repository
	store.NamespaceRegistry
	r *dynamoRepository
}

// wrapDynamo returns the handle of r.
func wrapDynamo(r *dynamoRepository) *DynamoDBRepository {
	return &DynamoDBRepository{Repository: r, NamespaceRegistry: r, r: r}
}

// Unwrap returns the store behind the handle ([store.Unwrap]).
func (h *DynamoDBRepository) Unwrap() store.Repository { return h.r }

// Table returns the table name.
func (h *DynamoDBRepository) Table() string { return h.r.Table() }

// NamespaceID returns the opaque id of the repository's namespace.
func (h *DynamoDBRepository) NamespaceID() string { return h.r.nsID }

// NamespaceName returns the name of the repository's namespace.
func (h *DynamoDBRepository) NamespaceName() string { return h.r.nsName }

// Namespace returns a repository for another registered namespace of the
// table, sharing the client and the namespace cache. It fails with
// *[NamespaceNotFoundError] when name is not registered.
func (h *DynamoDBRepository) Namespace(ctx context.Context, name string) (*DynamoDBRepository, error) {
	r, err := h.r.namespace(ctx, name)
	if err != nil {
		return nil, err
	}
	return wrapDynamo(r), nil
}

// VersionRecord reads the table's version record; ok is false when the
// table has none.
func (h *DynamoDBRepository) VersionRecord(ctx context.Context) (rec VersionRecord, ok bool, err error) {
	return h.r.VersionRecord(ctx)
}

// SetVersionRecord writes the table's version record.
func (h *DynamoDBRepository) SetVersionRecord(ctx context.Context, rec VersionRecord) error {
	return h.r.SetVersionRecord(ctx, rec)
}

// Table returns the table name.
func (r *dynamoRepository) Table() string { return r.opts.Table }

// NamespaceID returns the opaque id of the repository's namespace.
func (r *dynamoRepository) NamespaceID() string { return r.nsID }

// NamespaceName returns the name of the repository's namespace.
func (r *dynamoRepository) NamespaceName() string { return r.nsName }

// Close releases nothing today (the client belongs to the caller); it exists
// so that callers can treat the repository as a resource.
func (r *dynamoRepository) Close() error { return nil }

// Ping reports whether the table answers (a GetItem of the version
// record): nil, a *[TableNotFoundError], or an *[UnavailableError] naming
// the endpoint that does not answer.
func (r *dynamoRepository) Ping(ctx context.Context) error {
	_, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       primaryKey(pkSystem(reservedNamespace), skVersion),
	})
	if err != nil {
		return r.openErr(ctx, err)
	}
	return nil
}

// openErr gives an error of OpenDynamoDB (or Ping) its type: a missing
// table is a *TableNotFoundError, a refusal for want of permission an
// *AccessDeniedError, and a request that got no answer (no connection, no
// answer within OpenTimeout, a 5xx) an *UnavailableError naming the
// endpoint. Other errors, and the caller's cancellation (ctx), are
// returned as they are.
func (r *dynamoRepository) openErr(ctx context.Context, err error) error {
	var nf *types.ResourceNotFoundException
	var op *smithy.OperationError
	switch {
	case errors.As(err, &nf):
		return &TableNotFoundError{Table: r.opts.Table, Endpoint: r.endpoint(err), Cause: err}
	case ctx.Err() != nil || !errors.As(err, &op):
		return err
	case isAccessDenied(err):
		return &AccessDeniedError{Cause: err, Table: r.opts.Table}
	case errors.Is(err, context.DeadlineExceeded) || !answered(err):
		return &UnavailableError{Cause: &endpointError{endpoint: r.endpoint(err), timeout: r.opts.OpenTimeout, cause: err}, Table: r.opts.Table}
	}
	return err
}

// endpoint returns the endpoint a request that failed with err went to:
// the URL of its transport error, else the client's base endpoint or
// regional one, else "".
func (r *dynamoRepository) endpoint(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	client := r.client
	if oc, ok := client.(openClient); ok {
		client = oc.DynamoDBClient
	}
	if c, ok := client.(interface{ Options() dynamodb.Options }); ok {
		o := c.Options()
		switch {
		case o.BaseEndpoint != nil:
			return *o.BaseEndpoint
		case o.Region != "":
			return "https://dynamodb." + o.Region + ".amazonaws.com"
		}
	}
	return ""
}

// endpointError reports a DynamoDB endpoint that [OpenDynamoDB] could not
// reach, and what to check.
type endpointError struct {
	endpoint string
	timeout  time.Duration
	cause    error
}

func (e *endpointError) Error() string {
	at, why := "", sdkReason(e.cause)
	if e.endpoint != "" {
		at = " at " + e.endpoint
	}
	if errors.Is(e.cause, context.DeadlineExceeded) {
		why = fmt.Sprintf("no answer within %v (DynamoDBOptions.OpenTimeout)", e.timeout)
	}
	return fmt.Sprintf("limiter: cannot reach DynamoDB%s: %s; check that the endpoint is right and answers "+
		"(for DynamoDB Local: zae-limiter local up), and the network, region and credentials", at, why)
}

func (e *endpointError) Unwrap() error { return e.cause }
func (e *endpointError) ownMessage()   {}

// Name returns the table name (the [Repository] method).
func (r *dynamoRepository) Name() string { return r.opts.Table }

// writesPairs implements pairWriter: a conditional UpdateItem per item
// costs less than a TransactWriteItems of two.
func (r *dynamoRepository) writesPairs() {}

// createTable creates the table from the schema definition (ignoring an
// existing one), waits until it is ACTIVE and enables TTL on `ttl`.
func (r *dynamoRepository) createTable(ctx context.Context) error {
	_, err := r.client.CreateTable(ctx, tableDefinition(r.opts.Table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", r.opts.Table, err)
	}
	for {
		out, err := r.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.opts.Table)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", r.opts.Table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			break
		}
		if err := sleepContext(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if _, err := r.client.UpdateTimeToLive(ctx, ttlSpecification(r.opts.Table)); err != nil &&
		!strings.Contains(err.Error(), "TimeToLive is already enabled") {
		return fmt.Errorf("enable ttl on %s: %w", r.opts.Table, err)
	}
	return nil
}

// checkVersion reads the version record; when missing it writes one for the
// current schema (lambda_version NULL, so that a client that compares it
// with its aggregator Lambda's version never thinks that Lambda outdated);
// when present it refuses another major schema.
func (r *dynamoRepository) checkVersion(ctx context.Context) error {
	rec, ok, err := r.readVersion(ctx, false)
	if err != nil {
		return err
	}
	if !ok {
		return r.SetVersionRecord(ctx, VersionRecord{
			SchemaVersion:    currentSchemaVersion,
			ClientMinVersion: "0.0.0",
			UpdatedBy:        "client:go-" + ClientVersion,
		})
	}
	if major(rec.SchemaVersion) != "" && major(rec.SchemaVersion) != major(currentSchemaVersion) {
		return &IncompatibleSchemaError{
			ClientVersion: ClientVersion,
			SchemaVersion: rec.SchemaVersion,
			Message:       fmt.Sprintf("this client supports schema %s.x", major(currentSchemaVersion)),
		}
	}
	return nil
}

func major(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(v, '.'); i > 0 {
		return v[:i]
	}
	return ""
}

// wrapErr adds context to a DynamoDB error (nil stays nil).
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// classifyWriteErr maps DynamoDB's refusals of a conditional write to
// store.ErrConditionFailed / store.ErrTransactionConflict (nothing was written); other
// errors are returned with context.
func classifyWriteErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return store.ErrConditionFailed
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		conflict := false
		for _, reason := range tce.CancellationReasons {
			switch aws.ToString(reason.Code) {
			case "ConditionalCheckFailed":
				return store.ErrConditionFailed
			case "TransactionConflict":
				conflict = true
			}
		}
		if conflict {
			return store.ErrTransactionConflict
		}
	}
	var tcf *types.TransactionConflictException
	if errors.As(err, &tcf) {
		return store.ErrTransactionConflict
	}
	return fmt.Errorf("%s: %w", op, err)
}

// VersionRecord reads the table's version record. ok is false when the table
// has none (a table that no client has opened yet).
func (r *dynamoRepository) VersionRecord(ctx context.Context) (rec VersionRecord, ok bool, err error) {
	v, ok, err := r.readVersion(ctx, true)
	return VersionRecord(v), ok, err
}

// readVersion reads the version record, strongly consistent or not.
func (r *dynamoRepository) readVersion(ctx context.Context, consistent bool) (versionRecord, bool, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.opts.Table),
		Key:            primaryKey(pkSystem(reservedNamespace), skVersion),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return versionRecord{}, false, wrapErr("read version record", err)
	}
	if len(out.Item) == 0 {
		return versionRecord{}, false, nil
	}
	return versionFromItem(out.Item), true, nil
}

// SetVersionRecord writes the table's version record (UpdatedAt defaults to
// now). Deploy tools call it after creating or upgrading a stack.
func (r *dynamoRepository) SetVersionRecord(ctx context.Context, rec VersionRecord) error {
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = r.opts.Now()
	}
	_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.opts.Table),
		Item:      versionItem(versionRecord(rec)),
	})
	return wrapErr("write version record", err)
}

// Retries of bucket writes.
//
// A speculative write, an adjustment or a normal write adds to a balance:
// sent again after DynamoDB applied it but the answer was lost (a 5xx after
// the write, a broken connection), it would take its amounts twice. So
// every single-item bucket write carries a write identifier
// (ddbschema.WriteID), which the item keeps among the identifiers of its
// last writes, and is conditioned on the item not holding it yet: a retry
// of a write that applied is refused, and the item the refusal returns
// holds the identifier, which the repository reads as "applied" (with that
// item as the one the write left). Transactions carry their own
// idempotency token (ClientRequestToken, which the SDK sets once per call
// and sends again with every retry). Such writes are therefore retried on
// every error the SDK's retryer retries, within the store timeout that
// bounds the whole call, with a short backoff (maxWriteRetryDelay; the
// SDK's standard one waits up to seconds, past the store timeout), except
// after throttling, which keeps the SDK's.
//
// A write whose every attempt failed without an answer may still have
// applied: the limiter reports it as unavailable, and what it took stays
// taken (under-admission, never a double charge). A retry is recognised as
// long as fewer than ddbschema.WriteIDSlots other writes of the item
// applied between the write and its retry.

// writeRetryDelay is the backoff before the first retry of a write
// (a random delay up to it, doubling with each attempt up to
// maxWriteRetryDelay).
const (
	writeRetryDelay    = 10 * time.Millisecond
	maxWriteRetryDelay = 80 * time.Millisecond
)

// writeOptions retries a bucket write that carries a write identifier, or
// a transaction, on every error the client's retryer retries, with a
// short backoff.
func writeOptions(o *dynamodb.Options) {
	if o.Retryer != nil {
		o.Retryer = idempotentRetry{o.Retryer}
	}
}

// idempotentRetry is a retryer for requests that may be sent again safely:
// it retries what its inner retryer retries, and waits at most a short
// backoff between attempts unless DynamoDB throttled the request.
type idempotentRetry struct{ aws.Retryer }

// RetryDelay implements aws.Retryer.
func (r idempotentRetry) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := r.Retryer.RetryDelay(attempt, err)
	if derr != nil || throttled(err) {
		return d, derr
	}
	limit := min(writeRetryDelay<<min(max(attempt-1, 0), 8), maxWriteRetryDelay)
	return min(d, rand.N(limit)+1), nil
}

// throttled reports whether DynamoDB refused a request for its rate.
func throttled(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		_, ok := retry.DefaultThrottleErrorCodes[api.ErrorCode()]
		return ok
	}
	return false
}

// openClient is the client of [OpenDynamoDB]'s own requests: a connection
// that could not be made is not retried, so that an endpoint where nothing
// listens fails the open at once instead of after the SDK's backoff.
type openClient struct{ DynamoDBClient }

// noDialRetry is a retryer that does not retry a connection that could not
// be made (nothing listens, no route, no such host).
type noDialRetry struct{ aws.Retryer }

// IsErrorRetryable implements aws.Retryer.
func (r noDialRetry) IsErrorRetryable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) {
		return false
	}
	return r.Retryer.IsErrorRetryable(err)
}

func openOptions(o *dynamodb.Options) {
	if o.Retryer != nil {
		o.Retryer = noDialRetry{o.Retryer}
	}
}

func (c openClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.DynamoDBClient.GetItem(ctx, in, append(optFns, openOptions)...)
}

func (c openClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return c.DynamoDBClient.PutItem(ctx, in, append(optFns, openOptions)...)
}

func (c openClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return c.DynamoDBClient.TransactWriteItems(ctx, in, append(optFns, openOptions)...)
}

func (c openClient) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return c.DynamoDBClient.CreateTable(ctx, in, append(optFns, openOptions)...)
}

// queryAll runs a query through every page.
func (r *dynamoRepository) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(r.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// bucketCache holds the bucket items as the last write of this process
// returned them (or, until a write does, as a read did), per namespace and
// key: a hint for the exact write, never
// trusted for a decision that refuses or admits (the write's condition
// checks it). With each it keeps the item's key as requests carry it,
// shared read-only by them, as the speculative templates' values are.
type bucketCache struct {
	mu sync.Mutex
	c  *lru.Cache[bucketCacheKey, *cachedBucket]
}

type bucketCacheKey struct {
	ns  string
	key store.BucketKey
}

// cachedBucket is one kept item; b changes under bucketCache.mu.
type cachedBucket struct {
	b   *store.Bucket
	key map[string]types.AttributeValue
}

// newBucketCache returns a cache of at most size items (none when size ≤
// 0).
func newBucketCache(size int) *bucketCache {
	return &bucketCache{c: lru.New[bucketCacheKey, *cachedBucket](max(size, 0), 0)}
}

func (c *bucketCache) get(ns string, key store.BucketKey) *store.Bucket {
	b, _ := c.getWithKey(ns, key)
	return b
}

// getWithKey returns the item kept for key, and the key value of its
// requests; nil and nil when none is kept.
func (c *bucketCache) getWithKey(ns string, key store.BucketKey) (*store.Bucket, map[string]types.AttributeValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.c.Get(bucketCacheKey{ns, key}, time.Time{})
	if !ok {
		return nil, nil
	}
	return e.b, e.key
}

// put keeps b (read-only from now on) as the item of key.
func (c *bucketCache) put(ns string, key store.BucketKey, b *store.Bucket) {
	if b == nil {
		c.forget(ns, key)
		return
	}
	k := bucketCacheKey{ns, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.c.Get(k, time.Time{}); ok {
		e.b = b
		return
	}
	if c.c.MaxEntries() > 0 {
		c.c.Add(k, &cachedBucket{b: b, key: ddbschema.BucketKeyValue(ns, key.EntityID, key.Resource, key.Shard)}, time.Time{})
	}
}

// putIfAbsent keeps b as the item of key when none is kept: an item as a
// read returned it (eventually consistent) must not replace one a write
// returned, which may be newer.
func (c *bucketCache) putIfAbsent(ns string, key store.BucketKey, b *store.Bucket) {
	k := bucketCacheKey{ns, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.c.Get(k, time.Time{}); ok || c.c.MaxEntries() <= 0 {
		return
	}
	c.c.Add(k, &cachedBucket{b: b, key: ddbschema.BucketKeyValue(ns, key.EntityID, key.Resource, key.Shard)}, time.Time{})
}

// keeps reports whether the cache keeps items at all (its size is
// positive).
func (c *bucketCache) keeps() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.MaxEntries() > 0
}

func (c *bucketCache) forget(ns string, key store.BucketKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.Remove(bucketCacheKey{ns, key})
}

// cloneBucket returns a copy of b that shares nothing it can change: its
// states and its extras.
func cloneBucket(b *store.Bucket) *store.Bucket {
	c := *b
	c.States = append([]store.BucketState(nil), b.States...)
	if x := extrasOf(b); x != nil {
		cx := &itemExtras{exact: append([]exactState(nil), x.exact...), newestID: x.newestID, priorID: x.priorID}
		if x.wcu != nil {
			w := *x.wcu
			cx.wcu = &w
		}
		c.Private = cx
	}
	return &c
}
