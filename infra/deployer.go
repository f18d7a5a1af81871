package infra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	limiter "github.com/zaelimiter/limiter"
)

// Stack describes a deployed stack.
type Stack struct {
	Name         string
	ID           string
	Status       string // CloudFormation status, e.g. CREATE_COMPLETE
	StatusReason string
	Parameters   map[string]string
	Outputs      map[string]string
	CreatedAt    time.Time
	UpdatedAt    time.Time // zero when never updated
	Tags         map[string]string
}

// Event is one stack event, reported while a deploy or delete waits.
type Event struct {
	Time         time.Time
	LogicalID    string
	ResourceType string
	Status       string
	Reason       string
}

// StackError reports a stack operation that ended in a failed or
// rolled-back state. It matches [ErrDeployFailed].
type StackError struct {
	Stack     string
	Operation string // "create", "update" or "delete"
	Status    string // the stack's final status, e.g. ROLLBACK_COMPLETE
	// Resource and Reason are the first resource that failed in this
	// operation (its logical ID) and why; empty when no event named one.
	Resource string
	Reason   string
}

// Error returns a one-line description naming the failed resource.
func (e *StackError) Error() string {
	msg := fmt.Sprintf("infra: %s stack %s: %s", e.Operation, e.Stack, e.Status)
	if e.Resource != "" {
		msg += fmt.Sprintf(": %s failed: %s", e.Resource, e.Reason)
	}
	return msg
}

// Is reports whether target is [ErrDeployFailed].
func (e *StackError) Is(target error) bool { return target == ErrDeployFailed }

// DeployerOptions configure a [Deployer].
type DeployerOptions struct {
	// PollInterval is how often a waiting deploy or delete polls. Default 5 s.
	PollInterval time.Duration
	// Progress, when set, receives each new stack event while waiting, in
	// the order they happened. It is called from the deploying goroutine.
	Progress func(Event)
	// ArtifactBucket is the S3 bucket the aggregator's zip is uploaded to
	// (in the deployment's region). Empty means
	// zae-limiter-artifacts-{account}-{region}, which Deploy creates when
	// it does not exist. Objects go under the key prefix "{stack}/".
	ArtifactBucket string
	// ProvisionerZip is the provisioner Lambda's code (`make lambda`
	// builds bin/provisioner.zip), uploaded like the aggregator's when the
	// stack deploys the provisioner ([StackOptions.DeploysProvisioner]).
	// Nil keeps an existing stack's provisioner code.
	ProvisionerZip []byte
}

// DefaultPollInterval is the default [DeployerOptions.PollInterval].
const DefaultPollInterval = 5 * time.Second

// Deployer creates, updates, describes and deletes stacks. The endpoint
// (AWS, moto, LocalStack) comes from cfg (cfg.BaseEndpoint; with a base
// endpoint, S3 is addressed path-style, as emulators need). A Deployer is
// safe for concurrent use on different stacks. The zero value is not
// usable; call [NewDeployer].
type Deployer struct {
	cfg  aws.Config
	opts DeployerOptions

	cfn    *cloudformation.Client
	lambda *lambda.Client
	s3     *s3.Client
	sts    *sts.Client
}

// NewDeployer returns a Deployer for cfg.
func NewDeployer(cfg aws.Config, optFns ...func(*DeployerOptions)) *Deployer {
	d := &Deployer{cfg: cfg}
	for _, f := range optFns {
		f(&d.opts)
	}
	if d.opts.PollInterval <= 0 {
		d.opts.PollInterval = DefaultPollInterval
	}
	d.cfn = cloudformation.NewFromConfig(cfg)
	d.lambda = lambda.NewFromConfig(cfg)
	d.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
	d.sts = sts.NewFromConfig(cfg)
	return d
}

// Managed stack tags, by which [Deployer.List] finds limiter stacks
// (whichever client deployed them); they win over user tags of the same
// key.
const (
	TagManagedBy     = "ManagedBy"
	TagName          = "zae-limiter:name"
	TagType          = "zae-limiter:type"
	TagVersion       = "zae-limiter:version"
	TagLambdaVersion = "zae-limiter:lambda-version"
	TagSchemaVersion = "zae-limiter:schema-version"
	managedByValue   = "zae-limiter"
	typeLimiter      = "limiter"
)

// Version is the version of this module's Lambda code and tools, written to
// the stack tags zae-limiter:version and zae-limiter:lambda-version ("go-"
// and the client version, so that it never reads as the version of another
// client's code). The CLI and tests may set it.
var Version = "go-" + limiter.ClientVersion

// Deploy creates the stack, or updates it when it exists, uploads lambdaZip
// as the aggregator's code (when the aggregator is deployed, see
// [StackOptions.DeploysAggregator]) and waits until the stack is complete.
// lambdaZip must hold a `bootstrap` executable for provided.al2023 on arm64
// (`make lambda` builds bin/aggregator.zip); it may be nil when updating a
// stack whose aggregator code should stay as it is. An update without
// changes is a success. A failed or rolled-back operation is a
// [*StackError].
func (d *Deployer) Deploy(ctx context.Context, stackName string, opts StackOptions, lambdaZip []byte) (Stack, error) {
	params, err := opts.Parameters(stackName)
	if err != nil {
		return Stack{}, err
	}
	existing, err := d.settledStack(ctx, stackName)
	if err != nil && !errors.Is(err, ErrStackNotFound) {
		return Stack{}, err
	}
	exists := err == nil
	if exists && (existing.Status == string(cfntypes.StackStatusRollbackComplete) || existing.Status == string(cfntypes.StackStatusRollbackFailed)) {
		return Stack{}, fmt.Errorf("infra: deploy %s: the stack is %s after a failed creation; delete it and deploy again", stackName, existing.Status)
	}

	var code *codeObject
	var usePrevious []string
	if opts.DeploysAggregator() {
		switch {
		case lambdaZip != nil:
			if code, err = d.uploadCode(ctx, stackName, "aggregator", lambdaZip); err != nil {
				return Stack{}, err
			}
			params[ParamCodeS3Bucket], params[ParamCodeS3Key] = code.bucket, code.key
		case exists && existing.Parameters[ParamCodeS3Key] != "":
			usePrevious = []string{ParamCodeS3Bucket, ParamCodeS3Key}
		default:
			return Stack{}, fmt.Errorf("%w: deploy %s: the aggregator is enabled but no code (lambdaZip) was given", ErrInvalidOptions, stackName)
		}
	} else {
		params[ParamCodeS3Bucket], params[ParamCodeS3Key] = "", ""
	}
	var provCode *codeObject
	if opts.DeploysProvisioner() {
		switch {
		case d.opts.ProvisionerZip != nil:
			if provCode, err = d.uploadCode(ctx, stackName, "provisioner", d.opts.ProvisionerZip); err != nil {
				return Stack{}, err
			}
			params[ParamProvisionerCodeS3Bucket], params[ParamProvisionerCodeS3Key] = provCode.bucket, provCode.key
		case exists && existing.Parameters[ParamProvisionerCodeS3Key] != "":
			usePrevious = append(usePrevious, ParamProvisionerCodeS3Bucket, ParamProvisionerCodeS3Key)
		default:
			return Stack{}, fmt.Errorf("%w: deploy %s: the provisioner is enabled but no code (DeployerOptions.ProvisionerZip) was given", ErrInvalidOptions, stackName)
		}
	} else {
		params[ParamProvisionerCodeS3Bucket], params[ParamProvisionerCodeS3Key] = "", ""
	}
	cfnParams := make([]cfntypes.Parameter, 0, len(params)+len(usePrevious))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		cfnParams = append(cfnParams, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(params[k])})
	}
	for _, k := range usePrevious {
		cfnParams = append(cfnParams, cfntypes.Parameter{ParameterKey: aws.String(k), UsePreviousValue: aws.Bool(true)})
	}
	tags := stackTags(stackName, opts.Tags)
	caps := []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam}

	if !exists {
		out, err := d.cfn.CreateStack(ctx, &cloudformation.CreateStackInput{
			StackName:    aws.String(stackName),
			TemplateBody: aws.String(string(template)),
			Parameters:   cfnParams,
			Capabilities: caps,
			Tags:         tags,
		})
		if err != nil {
			return Stack{}, fmt.Errorf("infra: create stack %s: %w", stackName, err)
		}
		if err := d.wait(ctx, stackName, aws.ToString(out.StackId), "create", nil); err != nil {
			return Stack{}, err
		}
	} else {
		err := d.updateStack(ctx, stackName, "update", &cloudformation.UpdateStackInput{
			StackName:    aws.String(existing.ID),
			TemplateBody: aws.String(string(template)),
			Parameters:   cfnParams,
			Capabilities: caps,
			Tags:         tags,
		})
		if err != nil {
			return Stack{}, err
		}
	}

	if code != nil {
		if err := d.ensureCode(ctx, stackName+"-aggregator", code); err != nil {
			return Stack{}, err
		}
		// Older zips of this stack are no longer needed for a rollback.
		// Leftovers are harmless (the next deploy or Delete removes them),
		// so a failure here does not fail the deploy.
		_ = d.removeArtifacts(ctx, code.bucket, stackName+"/aggregator-", code.key)
	}
	if provCode != nil {
		if err := d.ensureCode(ctx, stackName+"-limits-provisioner", provCode); err != nil {
			return Stack{}, err
		}
		_ = d.removeArtifacts(ctx, provCode.bucket, stackName+"/provisioner-", provCode.key)
	}
	st, err := d.Status(ctx, stackName)
	if err != nil {
		return Stack{}, err
	}
	return st, nil
}

// Status describes the stack. A missing stack is [ErrStackNotFound].
func (d *Deployer) Status(ctx context.Context, stackName string) (Stack, error) {
	s, err := d.describe(ctx, stackName)
	if err != nil {
		return Stack{}, fmt.Errorf("infra: describe stack %s: %w", stackName, err)
	}
	return s, nil
}

// Delete deletes the stack and, when wait is true, waits until it is gone.
// It first empties the stack's audit archive bucket (CloudFormation cannot
// delete a bucket that holds objects: the archived audit events go with the
// stack) and, when it waited until the stack is gone, removes the stack's
// aggregator zips from the artifacts bucket. A stack whose table has deletion protection is
// refused before anything is touched. A missing stack is
// [ErrStackNotFound].
func (d *Deployer) Delete(ctx context.Context, stackName string, wait bool) error {
	st, err := d.settledStack(ctx, stackName)
	if err != nil {
		return err
	}
	if st.Parameters["EnableDeletionProtection"] == "true" {
		return fmt.Errorf("infra: delete stack %s: its table has deletion protection; deploy with EnableDeletionProtection off first", stackName)
	}
	if b := st.Outputs["AuditArchiveBucketName"]; b != "" {
		if err := d.emptyBucket(ctx, b, ""); err != nil {
			return fmt.Errorf("infra: delete stack %s: empty archive bucket: %w", stackName, err)
		}
	}
	seen, err := d.eventIDs(ctx, st.ID)
	if err != nil {
		return err
	}
	if _, err := d.cfn.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(st.ID)}); err != nil {
		return fmt.Errorf("infra: delete stack %s: %w", stackName, err)
	}
	if !wait {
		return nil
	}
	if err := d.wait(ctx, stackName, st.ID, "delete", seen); err != nil {
		return err
	}
	for _, b := range []string{st.Parameters[ParamCodeS3Bucket], st.Parameters[ParamProvisionerCodeS3Bucket]} {
		if b == "" {
			continue
		}
		if err := d.removeArtifacts(ctx, b, stackName+"/", ""); err != nil {
			return fmt.Errorf("infra: delete stack %s: remove Lambda code: %w", stackName, err)
		}
	}
	return nil
}

// settledStack describes the stack, first waiting out an operation in
// progress (whatever its outcome).
func (d *Deployer) settledStack(ctx context.Context, stackName string) (Stack, error) {
	st, err := d.Status(ctx, stackName)
	if err != nil || !inProgress(st.Status) {
		return st, err
	}
	seen, err := d.eventIDs(ctx, st.ID)
	if err != nil {
		return Stack{}, err
	}
	if err := d.wait(ctx, stackName, st.ID, "wait for", seen); err != nil && !errors.Is(err, ErrDeployFailed) {
		return Stack{}, err
	}
	return d.Status(ctx, stackName)
}

func (d *Deployer) describe(ctx context.Context, nameOrID string) (Stack, error) {
	out, err := d.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(nameOrID)})
	if isNotFound(err) {
		return Stack{}, ErrStackNotFound
	}
	if err != nil {
		return Stack{}, err
	}
	if len(out.Stacks) == 0 {
		return Stack{}, ErrStackNotFound
	}
	return stackOf(out.Stacks[0]), nil
}

// stackOf converts a described stack.
func stackOf(s cfntypes.Stack) Stack {
	st := Stack{
		Name:         aws.ToString(s.StackName),
		ID:           aws.ToString(s.StackId),
		Status:       string(s.StackStatus),
		StatusReason: aws.ToString(s.StackStatusReason),
		Parameters:   make(map[string]string, len(s.Parameters)),
		Outputs:      make(map[string]string, len(s.Outputs)),
		CreatedAt:    aws.ToTime(s.CreationTime),
		UpdatedAt:    aws.ToTime(s.LastUpdatedTime),
		Tags:         make(map[string]string, len(s.Tags)),
	}
	for _, t := range s.Tags {
		st.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, p := range s.Parameters {
		st.Parameters[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	for _, o := range s.Outputs {
		st.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return st
}

// wait polls the stack (by ID) until its status is final, reporting new
// events. seen holds the IDs of events from before the operation. A failed
// outcome is a *StackError naming the first failed resource.
func (d *Deployer) wait(ctx context.Context, stackName, stackID, op string, seen map[string]bool) error {
	if seen == nil {
		seen = map[string]bool{}
	}
	var events []cfntypes.StackEvent // this operation's, oldest first
	report := func() error {
		fresh, err := d.newEvents(ctx, stackID, seen)
		if err != nil {
			return fmt.Errorf("infra: %s stack %s: %w", op, stackName, err)
		}
		events = append(events, fresh...)
		if d.opts.Progress != nil {
			for _, e := range fresh {
				d.opts.Progress(Event{
					Time:         aws.ToTime(e.Timestamp),
					LogicalID:    aws.ToString(e.LogicalResourceId),
					ResourceType: aws.ToString(e.ResourceType),
					Status:       string(e.ResourceStatus),
					Reason:       aws.ToString(e.ResourceStatusReason),
				})
			}
		}
		return nil
	}
	// A deleted stack is gone by name (by ID it stays DELETE_COMPLETE for
	// a while; moto cannot describe it by ID once deleted).
	target := stackID
	if op == "delete" {
		target = stackName
	}
	for {
		st, err := d.describe(ctx, target)
		if errors.Is(err, ErrStackNotFound) && op == "delete" {
			return report()
		}
		if err != nil {
			return fmt.Errorf("infra: %s stack %s: %w", op, stackName, err)
		}
		if err := report(); err != nil {
			return err
		}
		if !inProgress(st.Status) {
			if succeeded(st.Status) {
				return nil
			}
			serr := &StackError{Stack: stackName, Operation: op, Status: st.Status}
			serr.Resource, serr.Reason = firstFailure(events, stackName, st.StatusReason)
			return serr
		}
		t := time.NewTimer(d.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("infra: %s stack %s: %w", op, stackName, ctx.Err())
		case <-t.C:
		}
	}
}

// eventIDs returns the IDs of the stack's newest page of events: enough to
// tell a later operation's events from earlier ones (events come newest
// first, and newEvents stops at the first one it has seen).
func (d *Deployer) eventIDs(ctx context.Context, stackID string) (map[string]bool, error) {
	out, err := d.cfn.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(stackID)})
	if err != nil {
		return nil, fmt.Errorf("infra: stack events of %s: %w", stackID, err)
	}
	seen := make(map[string]bool, len(out.StackEvents))
	for _, e := range out.StackEvents {
		seen[aws.ToString(e.EventId)] = true
	}
	return seen, nil
}

// newEvents returns the events not in seen, oldest first, and adds them to
// seen.
func (d *Deployer) newEvents(ctx context.Context, stackID string, seen map[string]bool) ([]cfntypes.StackEvent, error) {
	var fresh []cfntypes.StackEvent
	p := cloudformation.NewDescribeStackEventsPaginator(d.cfn, &cloudformation.DescribeStackEventsInput{StackName: aws.String(stackID)})
pages:
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("stack events: %w", err)
		}
		for _, e := range page.StackEvents {
			if seen[aws.ToString(e.EventId)] {
				break pages
			}
			fresh = append(fresh, e)
		}
	}
	slices.Reverse(fresh)
	for _, e := range fresh {
		seen[aws.ToString(e.EventId)] = true
	}
	return fresh, nil
}

// firstFailure names the first resource that failed among events (oldest
// first): a resource other than the stack when there is one.
func firstFailure(events []cfntypes.StackEvent, stackName, stackReason string) (resource, reason string) {
	var stackFail *cfntypes.StackEvent
	for i, e := range events {
		if !strings.HasSuffix(string(e.ResourceStatus), "_FAILED") {
			continue
		}
		if aws.ToString(e.ResourceType) == "AWS::CloudFormation::Stack" && aws.ToString(e.LogicalResourceId) == stackName {
			if stackFail == nil {
				stackFail = &events[i]
			}
			continue
		}
		return aws.ToString(e.LogicalResourceId), aws.ToString(e.ResourceStatusReason)
	}
	if stackFail != nil {
		return stackName, aws.ToString(stackFail.ResourceStatusReason)
	}
	if stackReason != "" {
		return stackName, stackReason
	}
	return "", ""
}

// inProgress reports whether an operation is under way. REVIEW_IN_PROGRESS
// (a stack created by a change set that was never executed) waits for a
// person, not for CloudFormation.
func inProgress(status string) bool {
	return strings.HasSuffix(status, "_IN_PROGRESS") && status != string(cfntypes.StackStatusReviewInProgress)
}

func succeeded(status string) bool {
	switch cfntypes.StackStatus(status) {
	case cfntypes.StackStatusCreateComplete, cfntypes.StackStatusUpdateComplete,
		cfntypes.StackStatusDeleteComplete, cfntypes.StackStatusImportComplete:
		return true
	}
	return false
}

// isNotFound recognises DescribeStacks' answer for a missing stack: a
// ValidationError "Stack with id X does not exist".
func isNotFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist")
}

// isNoUpdates recognises UpdateStack's answer when nothing changed.
func isNoUpdates(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "No updates are to be performed")
}

func stackTags(stackName string, user map[string]string) []cfntypes.Tag {
	all := maps.Clone(user)
	if all == nil {
		all = map[string]string{}
	}
	all[TagManagedBy] = managedByValue
	all[TagName] = stackName
	all[TagType] = typeLimiter
	all[TagVersion] = Version
	all[TagLambdaVersion] = Version
	all[TagSchemaVersion] = limiter.SchemaVersion
	tags := make([]cfntypes.Tag, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		tags = append(tags, cfntypes.Tag{Key: aws.String(k), Value: aws.String(all[k])})
	}
	return tags
}

// updateStack sends in, an update of stackName's stack, and waits for it
// to end; verb names the operation in errors and events. An update that
// changes nothing is a success.
func (d *Deployer) updateStack(ctx context.Context, stackName, verb string, in *cloudformation.UpdateStackInput) error {
	id := aws.ToString(in.StackName)
	seen, err := d.eventIDs(ctx, id)
	if err != nil {
		return err
	}
	_, err = d.cfn.UpdateStack(ctx, in)
	switch {
	case isNoUpdates(err):
		return nil
	case err != nil:
		return fmt.Errorf("infra: %s stack %s: %w", verb, stackName, err)
	}
	return d.wait(ctx, stackName, id, verb, seen)
}
