// Layer 5, the DynamoDB repository: OpenDynamoDB and the namespace registry.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"golang.org/x/sync/errgroup"
)

// The namespace registry lives in the reserved namespace:
// PK `_/SYSTEM#`, a forward record `#NAMESPACE#{name}` → id for every active
// namespace and a reverse record `#NSID#{id}` → name, with the status, for
// every namespace that has not been purged.

// registerNamespacesConcurrency bounds the registrations RegisterNamespaces
// runs at once.
const registerNamespacesConcurrency = 8

// namespaceIDPattern matches the ids newNamespaceID produces and other
// URL-safe base64 ids another client of the table may have registered, with
// some room in length.
var namespaceIDPattern = regexp.MustCompile(`\A[A-Za-z0-9_-]{1,64}\z`)

// validateNamespaceName rejects the empty name and the reserved "_". Names
// are otherwise free text: they only appear in the registry's sort keys.
func validateNamespaceName(name string) error {
	switch name {
	case "":
		return store.NewValidationError(ErrValidation, "namespace", name, "cannot be empty")
	case reservedNamespace:
		return store.NewValidationError(ErrValidation, "namespace", name, "reserved for system use")
	}
	return nil
}

// validateNamespaceID rejects ids that no registration can have produced:
// empty, the reserved "_" (whose purge would target the registry itself),
// or characters outside URL-safe base64.
func validateNamespaceID(id string) error {
	switch {
	case id == "":
		return store.NewValidationError(ErrValidation, "namespace_id", id, "cannot be empty")
	case id == reservedNamespace:
		return store.NewValidationError(ErrValidation, "namespace_id", id, "reserved for system use")
	case !namespaceIDPattern.MatchString(id):
		return store.NewValidationError(ErrValidation, "namespace_id", id,
			"must be a namespace id (1 to 64 letters, digits, '-' or '_')")
	}
	return nil
}

// registryKey returns the key of the registry record with sort key sk.
func registryKey(sk string) map[string]types.AttributeValue {
	return primaryKey(pkSystem(reservedNamespace), sk)
}

// namespaceInfo converts a registry record. name is used when the record
// lacks namespace_name.
func namespaceInfo(rec namespaceRecord, name string) store.NamespaceInfo {
	info := store.NamespaceInfo(rec)
	if info.Name == "" {
		info.Name = name
	}
	if info.Status == "" {
		info.Status = "unknown"
	}
	return info
}

// readRegistry reads the registry record with sort key sk; found is false
// when it does not exist.
func (r *dynamoRepository) readRegistry(ctx context.Context, sk string, consistent bool) (rec namespaceRecord, item map[string]types.AttributeValue, found bool, err error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.opts.Table),
		Key:            registryKey(sk),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return namespaceRecord{}, nil, false, err
	}
	if len(out.Item) == 0 {
		return namespaceRecord{}, nil, false, nil
	}
	return namespaceFromItem(out.Item), out.Item, true, nil
}

// queryRegistry returns every registry record whose sort key starts with
// prefix (all pages, in sort-key order).
func (r *dynamoRepository) queryRegistry(ctx context.Context, prefix string) ([]map[string]types.AttributeValue, error) {
	return r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :sk_prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": schemaS(pkSystem(reservedNamespace)), ":sk_prefix": schemaS(prefix),
		},
		ConsistentRead: aws.Bool(true),
	})
}

// cacheNamespace remembers name → id in the name cache shared with scoped
// repositories.
func (r *dynamoRepository) cacheNamespace(name, id string) {
	now := r.shared.now()
	r.shared.mu.Lock()
	r.shared.nsIDs.Add(name, id, now)
	r.shared.mu.Unlock()
}

// forgetNamespace drops name from the shared name cache.
func (r *dynamoRepository) forgetNamespace(name string) {
	r.shared.mu.Lock()
	r.shared.nsIDs.Remove(name)
	r.shared.mu.Unlock()
}

// forgetNamespaceID drops every trace of a purged namespace id from the
// shared cache: the names resolving to it.
func (r *dynamoRepository) forgetNamespaceID(id string) {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	r.shared.nsIDs.RemoveFunc(func(_, cached string) bool { return cached == id })
}

// ensureNamespace resolves name, registering it when it is new.
func (r *dynamoRepository) ensureNamespace(ctx context.Context, name string) (string, error) {
	id, ok, err := r.resolveNamespace(ctx, name)
	if err != nil || ok {
		return id, err
	}
	return r.registerNamespace(ctx, name)
}

// resolveNamespace returns the id of an active namespace: from the shared
// name cache (entries live until DeleteNamespace in this process drops
// them, or for at most the cache's age limit), else from its forward record
// (an eventually consistent read).
func (r *dynamoRepository) resolveNamespace(ctx context.Context, name string) (string, bool, error) {
	now := r.shared.now()
	r.shared.mu.Lock()
	id, ok := r.shared.nsIDs.Get(name, now)
	r.shared.mu.Unlock()
	if ok {
		return id, true, nil
	}
	rec, _, found, err := r.readRegistry(ctx, skNamespace(name), false)
	if err != nil {
		return "", false, wrapErr("resolve namespace "+name, err)
	}
	if !found || rec.Status == namespaceDeleted || rec.Status == namespacePurging || rec.ID == "" {
		return "", false, nil
	}
	r.cacheNamespace(name, rec.ID)
	return rec.ID, true, nil
}

// registerNamespace creates the forward and reverse registry records of a
// new namespace in one transaction. When the transaction is refused because
// the name is registered, the existing id (read strongly consistently) is
// returned; when it is refused while the name is still free (a concurrent
// registration in flight), it is retried up to maxConflictRetries times.
func (r *dynamoRepository) registerNamespace(ctx context.Context, name string) (string, error) {
	if err := validateNamespaceName(name); err != nil {
		return "", err
	}
	cond := aws.String("attribute_not_exists(PK)")
	for attempt := 0; ; attempt++ {
		id, err := newNamespaceID(r.nsIDSource)
		if err != nil {
			return "", err
		}
		rec := namespaceRecord{ID: id, Name: name, Status: namespaceActive, CreatedAt: r.opts.Now()}
		_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(r.opts.Table), Item: namespaceForwardItem(rec), ConditionExpression: cond}},
			{Put: &types.Put{TableName: aws.String(r.opts.Table), Item: namespaceReverseItem(rec), ConditionExpression: cond}},
		}})
		if err == nil {
			r.cacheNamespace(name, id)
			return id, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return "", wrapErr("register namespace "+name, err)
		}
		existing, _, found, err := r.readRegistry(ctx, skNamespace(name), true)
		if err != nil {
			return "", wrapErr("register namespace "+name, err)
		}
		if found && existing.ID != "" && existing.Status != namespaceDeleted && existing.Status != namespacePurging {
			r.cacheNamespace(name, existing.ID)
			return existing.ID, nil
		}
		if attempt == maxConflictRetries {
			return "", &NamespaceStateError{Namespace: name, State: "unknown",
				Message: fmt.Sprintf("namespace %q could not be registered", name)}
		}
		if err := sleepContext(ctx, conflictBackoff(attempt)); err != nil {
			return "", err
		}
	}
}

// RegisterNamespace registers the namespace name and returns its id. It is
// idempotent: an active namespace of that name keeps its id, which is
// returned. The name must not be empty or the reserved "_" (a
// *[ValidationError]); otherwise names are free text. The id is 11 URL-safe
// base64 characters and never starts with '-'.
func (r *dynamoRepository) RegisterNamespace(ctx context.Context, name string) (string, error) {
	return r.registerNamespace(ctx, name)
}

// RegisterNamespaces registers every name (duplicates once) and returns the
// id of each. All names are validated before the first write; registrations
// run concurrently, at most 8 at a time. On error the map is nil, but
// namespaces registered before the error stay registered.
func (r *dynamoRepository) RegisterNamespaces(ctx context.Context, names ...string) (map[string]string, error) {
	unique := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if err := validateNamespaceName(name); err != nil {
			return nil, err
		}
		if !seen[name] {
			seen[name] = true
			unique = append(unique, name)
		}
	}
	ids := make([]string, len(unique))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(registerNamespacesConcurrency)
	for i, name := range unique {
		g.Go(func() error {
			id, err := r.registerNamespace(gctx, name)
			ids[i] = id
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(unique))
	for i, name := range unique {
		out[name] = ids[i]
	}
	return out, nil
}

// GetNamespace returns the active namespace name, read strongly
// consistently. It fails with *[NamespaceNotFoundError] when no active
// namespace has that name (deleted namespaces are found by id with
// [store.NamespaceRegistry]).
func (r *dynamoRepository) GetNamespace(ctx context.Context, name string) (store.NamespaceInfo, error) {
	if err := validateNamespaceName(name); err != nil {
		return store.NamespaceInfo{}, err
	}
	rec, _, found, err := r.readRegistry(ctx, skNamespace(name), true)
	if err != nil {
		return store.NamespaceInfo{}, wrapErr("get namespace "+name, err)
	}
	if !found {
		return store.NamespaceInfo{}, &NamespaceNotFoundError{Namespace: name}
	}
	return namespaceInfo(rec, name), nil
}

// ListNamespaces returns every active namespace (all pages of the forward
// records), sorted by name.
func (r *dynamoRepository) ListNamespaces(ctx context.Context) ([]store.NamespaceInfo, error) {
	items, err := r.queryRegistry(ctx, skNamespacePrefix)
	if err != nil {
		return nil, wrapErr("list namespaces", err)
	}
	out := make([]store.NamespaceInfo, 0, len(items))
	for _, item := range items {
		sk, _ := schemaGetS(item, attrSK)
		out = append(out, namespaceInfo(namespaceFromItem(item), strings.TrimPrefix(sk, skNamespacePrefix)))
	}
	return out, nil
}

// DeleteNamespace soft-deletes the namespace name: in one transaction its
// forward record is removed (on condition that it still holds the id just
// read) and its reverse record is marked deleted with deleted_at = now. The
// name leaves the shared name cache. The namespace's data is kept until
// [store.NamespaceRegistry]; [store.NamespaceRegistry]
// undoes the deletion. Deleting a name that is not registered does nothing.
// A concurrent change of the registry makes it re-read and retry, at most
// maxConflictRetries times.
func (r *dynamoRepository) DeleteNamespace(ctx context.Context, name string) error {
	if err := validateNamespaceName(name); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		fwd, item, found, err := r.readRegistry(ctx, skNamespace(name), true)
		if err != nil {
			return wrapErr("delete namespace "+name, err)
		}
		if !found || fwd.ID == "" {
			r.forgetNamespace(name)
			return nil
		}
		created, ok := item[attrCreatedAt]
		if !ok {
			created = schemaS(formatISOSeconds(r.opts.Now()))
		}
		// The reverse update also rewrites the reverse record's identity, so
		// a missing or partial reverse record is repaired rather than left
		// without a name.
		_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Delete: &types.Delete{
				TableName:                 aws.String(r.opts.Table),
				Key:                       registryKey(skNamespace(name)),
				ConditionExpression:       aws.String("namespace_id = :id"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":id": schemaS(fwd.ID)},
			}},
			{Update: &types.Update{
				TableName: aws.String(r.opts.Table),
				Key:       registryKey(skNSID(fwd.ID)),
				UpdateExpression: aws.String("SET #status = :deleted, deleted_at = :now, namespace_id = :id, namespace_name = :name, " +
					"created_at = if_not_exists(created_at, :created), GSI4PK = :gsi4pk, GSI4SK = :gsi4sk"),
				ExpressionAttributeNames: map[string]string{"#status": attrStatus},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":deleted": schemaS(namespaceDeleted), ":now": schemaS(formatISOSeconds(r.opts.Now())),
					":id": schemaS(fwd.ID), ":name": schemaS(name), ":created": created,
					":gsi4pk": schemaS(reservedNamespace), ":gsi4sk": schemaS(pkSystem(reservedNamespace)),
				},
			}},
		}})
		if err == nil {
			r.forgetNamespace(name)
			return nil
		}
		if err := r.registryRetry(ctx, "delete namespace "+name, err, attempt); err != nil {
			return err
		}
	}
}

// registryRetry decides after a refused registry transaction: a condition
// failure or conflict (nothing was written) waits and returns nil so the
// caller re-reads and retries, up to maxConflictRetries times; anything
// else is returned with context.
func (r *dynamoRepository) registryRetry(ctx context.Context, op string, err error, attempt int) error {
	cerr := classifyWriteErr(op, err)
	if (cerr != store.ErrConditionFailed && cerr != store.ErrTransactionConflict) || attempt == maxConflictRetries {
		return fmt.Errorf("%s: %w", op, err)
	}
	return sleepContext(ctx, conflictBackoff(attempt))
}

// cancellationCodes returns the per-item cancellation reason codes of a
// refused transaction ("None" for items that were fine), or nil for other
// errors.
func cancellationCodes(err error) []string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	codes := make([]string, len(tce.CancellationReasons))
	for i, reason := range tce.CancellationReasons {
		codes[i] = aws.ToString(reason.Code)
	}
	return codes
}

// RecoverNamespace makes the deleted namespace id active again and returns
// its name. In one transaction the forward record is re-created (on
// condition that the name is still free) and the reverse record is marked
// active without deleted_at (on condition that it is not active or purging
// by then, so that a concurrent purge cannot be recovered). Errors:
//   - *[ValidationError] for a malformed id, or a record whose name is the
//     reserved "_";
//   - *[NamespaceNotFoundError] (with ID set) when the id has no registry
//     record;
//   - *[NamespaceStateError] with State "purging" (its purge is in progress,
//     and purging is terminal), "active" (it is not deleted) or
//     "re-registered" (the name was registered again by another caller).
func (r *dynamoRepository) RecoverNamespace(ctx context.Context, id string) (string, error) {
	if err := validateNamespaceID(id); err != nil {
		return "", err
	}
	op := "recover namespace " + id
	for attempt := 0; ; attempt++ {
		rev, _, found, err := r.readRegistry(ctx, skNSID(id), true)
		if err != nil {
			return "", wrapErr(op, err)
		}
		if !found {
			return "", &NamespaceNotFoundError{ID: id}
		}
		name := rev.Name
		if name == reservedNamespace {
			return "", store.NewValidationError(ErrValidation, "namespace", name, "reserved for system use")
		}
		switch rev.Status {
		case namespacePurging:
			return "", &NamespaceStateError{Namespace: name, State: namespacePurging,
				Message: fmt.Sprintf("cannot recover namespace %q: its purge is in progress, and purging is terminal", name)}
		case namespaceActive:
			return "", &NamespaceStateError{Namespace: name, State: namespaceActive,
				Message: fmt.Sprintf("namespace %q is already active (not deleted)", name)}
		}
		fwd := namespaceRecord{ID: id, Name: name, Status: namespaceActive, CreatedAt: rev.CreatedAt}
		if fwd.CreatedAt.IsZero() {
			fwd.CreatedAt = r.opts.Now()
		}
		_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(r.opts.Table), Item: namespaceForwardItem(fwd),
				ConditionExpression: aws.String("attribute_not_exists(PK)"),
			}},
			{Update: &types.Update{
				TableName:                aws.String(r.opts.Table),
				Key:                      registryKey(skNSID(id)),
				UpdateExpression:         aws.String("SET #status = :active REMOVE deleted_at"),
				ConditionExpression:      aws.String("attribute_exists(PK) AND (attribute_not_exists(#status) OR NOT #status IN (:active, :purging))"),
				ExpressionAttributeNames: map[string]string{"#status": attrStatus},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":active": schemaS(namespaceActive), ":purging": schemaS(namespacePurging),
				},
			}},
		}})
		if err == nil {
			r.cacheNamespace(name, id)
			return name, nil
		}
		if codes := cancellationCodes(err); len(codes) > 0 && codes[0] == "ConditionalCheckFailed" {
			return "", &NamespaceStateError{Namespace: name, State: "re-registered",
				Message: fmt.Sprintf("cannot recover namespace %q: the name was registered again by another caller", name)}
		}
		if err := r.registryRetry(ctx, op, err, attempt); err != nil {
			return "", err
		}
	}
}

// ListOrphanNamespaces returns the namespaces whose data has no active
// namespace any more (all pages of the reverse records): the deleted ones,
// which can be recovered or purged, and the purging ones, whose interrupted
// purge PurgeNamespace resumes. Status tells them apart. They are sorted by
// id.
func (r *dynamoRepository) ListOrphanNamespaces(ctx context.Context) ([]store.NamespaceInfo, error) {
	items, err := r.queryRegistry(ctx, skNSIDPrefix)
	if err != nil {
		return nil, wrapErr("list orphan namespaces", err)
	}
	out := make([]store.NamespaceInfo, 0)
	for _, item := range items {
		rec := namespaceFromItem(item)
		if rec.Status != namespaceDeleted && rec.Status != namespacePurging {
			continue
		}
		sk, _ := schemaGetS(item, attrSK)
		info := namespaceInfo(rec, "")
		if info.ID == "" {
			info.ID = strings.TrimPrefix(sk, skNSIDPrefix)
		}
		out = append(out, info)
	}
	return out, nil
}

// PurgeNamespace deletes every item of the deleted namespace id, then its
// reverse registry record. It first marks the namespace purging (on
// condition that it is not active, so a concurrent recovery cannot slip
// in), then queries GSI4 for the namespace's items page by page and deletes
// each page with BatchWriteItem in chunks of 25, re-sending unprocessed
// items. Items without GSI4 keys (the provisioner's state record) are not
// found and survive; GSI4 entries of items outside the
// namespace (whose partition key does not start with the id and a slash)
// are never deleted. Purging an unknown id does
// nothing; an interrupted purge is resumed by calling it again. It fails
// with *[NamespaceStateError] (State "active") for an active namespace and
// with *[ValidationError] for a malformed id.
func (r *dynamoRepository) PurgeNamespace(ctx context.Context, id string) error {
	if err := validateNamespaceID(id); err != nil {
		return err
	}
	op := "purge namespace " + id
	for attempt := 0; ; attempt++ {
		rev, _, found, err := r.readRegistry(ctx, skNSID(id), true)
		if err != nil {
			return wrapErr(op, err)
		}
		if !found {
			return nil
		}
		if rev.Status == namespaceActive {
			return &NamespaceStateError{Namespace: rev.Name, State: namespaceActive,
				Message: fmt.Sprintf("cannot purge active namespace %q: delete it first (DeleteNamespace)", rev.Name)}
		}
		if rev.Status == namespacePurging {
			break
		}
		_, err = r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(r.opts.Table),
			Key:                      registryKey(skNSID(id)),
			UpdateExpression:         aws.String("SET #status = :purging"),
			ConditionExpression:      aws.String("attribute_exists(PK) AND (attribute_not_exists(#status) OR #status <> :active)"),
			ExpressionAttributeNames: map[string]string{"#status": attrStatus},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":purging": schemaS(namespacePurging), ":active": schemaS(namespaceActive),
			},
		})
		if err == nil {
			break
		}
		if err := r.registryRetry(ctx, op, err, attempt); err != nil {
			return err
		}
	}
	p := dynamodb.NewQueryPaginator(r.client, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI4),
		KeyConditionExpression:    aws.String("GSI4PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(id)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return wrapErr(op, err)
		}
		items := r.ownIndexItems(ctx, indexGSI4, id, page.Items)
		keys := make([]map[string]types.AttributeValue, 0, len(items))
		for _, item := range items {
			keys = append(keys, map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]})
		}
		if err := r.batchDelete(ctx, keys); err != nil {
			return wrapErr(op, err)
		}
	}
	if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(r.opts.Table), Key: registryKey(skNSID(id)),
	}); err != nil {
		return wrapErr(op, err)
	}
	r.forgetNamespaceID(id)
	return nil
}

// OpenDynamoDB opens the rate-limiter table through client: it creates the
// table when asked, registers the namespace when it is new, and writes or
// checks the table's version record. A nil ctx or client is a
// *[ValidationError]; nil option functions are skipped.
func OpenDynamoDB(ctx context.Context, client DynamoDBClient, optFns ...func(*DynamoDBOptions)) (*DynamoDBRepository, error) {
	r, err := openDynamo(ctx, client, optFns...)
	if err != nil {
		return nil, err
	}
	return wrapDynamo(r), nil
}

// openDynamo is OpenDynamoDB; it returns the store itself.
func openDynamo(ctx context.Context, client DynamoDBClient, optFns ...func(*DynamoDBOptions)) (*dynamoRepository, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if isNil(client) {
		return nil, store.NewValidationError(ErrValidation, "client", "nil",
			"OpenDynamoDB needs a DynamoDB client (dynamodb.NewFromConfig, or NewDynamoDBLocalClient)")
	}
	o := DynamoDBOptions{
		Table:     envOr(ddbschema.EnvStack, DefaultTable),
		Namespace: envOr(ddbschema.EnvNamespace, DefaultNamespace),
	}
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = defaultOpenTimeout
		// A store timeout widened by the environment widens the open's
		// default alike (a loaded machine, DynamoDB Local warming up).
		if d, err := time.ParseDuration(os.Getenv(envStoreTimeout)); err == nil && d > o.OpenTimeout {
			o.OpenTimeout = d
		}
	}
	if err := ddbschema.ValidateStackName(o.Table); err != nil {
		return nil, err
	}
	if o.Namespace == "" || o.Namespace == reservedNamespace {
		return nil, store.NewValidationError(ErrValidation, "namespace", o.Namespace, "reserved for system use")
	}
	r := &dynamoRepository{
		client: openClient{client},
		opts:   o,
		shared: newSharedState(o),
	}
	defer func() { r.client = client }()
	if o.CreateTable {
		if err := r.createTable(ctx); err != nil {
			return nil, r.openErr(ctx, err)
		}
	}
	octx, cancel := context.WithTimeout(ctx, o.OpenTimeout)
	defer cancel()
	if err := r.checkVersion(octx); err != nil {
		return nil, r.openErr(ctx, err)
	}
	id, err := r.ensureNamespace(octx, o.Namespace)
	if err != nil {
		return nil, r.openErr(ctx, err)
	}
	r.bind(id, o.Namespace)
	return r, nil
}

// bind scopes r to a namespace.
func (r *dynamoRepository) bind(id, name string) { r.nsID, r.nsName = id, name }

// namespace returns a store for another registered namespace, sharing the
// client and the namespace cache, or *[NamespaceNotFoundError].
func (r *dynamoRepository) namespace(ctx context.Context, name string) (*dynamoRepository, error) {
	id, ok, err := r.resolveNamespace(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &NamespaceNotFoundError{Namespace: name}
	}
	scoped := &dynamoRepository{client: r.client, opts: r.opts, shared: r.shared}
	scoped.opts.Namespace = name
	scoped.bind(id, name)
	return scoped, nil
}
