// Package infra deploys zae-limiter into an AWS account: an embedded
// CloudFormation template (the DynamoDB table of [limiter.TableDefinition],
// its stream, the aggregator Lambda with its event source mapping, IAM
// policies and roles, the audit archive bucket, a DLQ and alarms) and a
// [Deployer] that creates, updates, describes and deletes the stack.
//
// STUB: the API below is fixed; the implementation is being written.
package infra

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// ErrStackNotFound is returned by [Deployer.Status] and [Deployer.Delete]
// when the stack does not exist.
var ErrStackNotFound = errors.New("infra: stack not found")

// Template returns the embedded CloudFormation template (YAML).
func Template() []byte { return nil }

// StackOptions are the stack's parameters (the original's StackOptions).
type StackOptions struct {
	SnapshotWindows            string // comma-separated, default "hourly,daily"
	UsageRetentionDays         int    // default 90
	AuditRetentionDays         int    // default 90
	EnableAggregator           bool   // default true
	PITRRecoveryDays           int    // 1–35; 0 means the AWS default (35)
	LogRetentionDays           int    // a CloudWatch retention period, default 30
	LambdaTimeout              int    // seconds, 1–900, default 60
	LambdaMemory               int    // MB, 128–3008, default 256
	EnableAlarms               bool   // default true
	AlarmSNSTopic              string // optional topic ARN
	LambdaDurationThresholdPct int    // 1–100, default 80
	PermissionBoundary         string // policy name or ARN
	RoleNameFormat             string // "{}" is replaced by the default name
	PolicyNameFormat           string // "{}" is replaced by the default name
	EnableAuditArchival        bool   // default true
	AuditArchiveGlacierDays    int    // 1–3650, default 90
	EnableTracing              bool
	CreateIAMRoles             bool
	CreateIAM                  bool // default true
	AggregatorRoleARN          string
	EnableDeletionProtection   bool
	Tags                       map[string]string
}

// DefaultStackOptions returns the defaults listed on [StackOptions].
func DefaultStackOptions() StackOptions { return StackOptions{} }

// Validate reports the first invalid option as a one-line error.
func (o StackOptions) Validate() error { return errors.ErrUnsupported }

// Stack describes a deployed stack.
type Stack struct {
	Name         string
	ID           string
	Status       string // CloudFormation status, e.g. CREATE_COMPLETE
	StatusReason string
	Parameters   map[string]string
	Outputs      map[string]string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Event is one stack event, reported while a deploy or delete waits.
type Event struct {
	Time         time.Time
	LogicalID    string
	ResourceType string
	Status       string
	Reason       string
}

// DeployerOptions configure a [Deployer].
type DeployerOptions struct {
	// PollInterval is how often a waiting deploy or delete polls. Default 5 s.
	PollInterval time.Duration
	// Progress, when set, receives each new stack event while waiting.
	Progress func(Event)
}

// Deployer creates, updates, describes and deletes stacks. The endpoint
// (AWS, moto, LocalStack) comes from cfg (cfg.BaseEndpoint).
type Deployer struct {
	cfg  aws.Config
	opts DeployerOptions
}

// NewDeployer returns a Deployer for cfg.
func NewDeployer(cfg aws.Config, optFns ...func(*DeployerOptions)) *Deployer {
	d := &Deployer{cfg: cfg}
	for _, f := range optFns {
		f(&d.opts)
	}
	return d
}

// Deploy creates the stack, or updates it when it exists, uploads lambdaZip
// as the aggregator's code (when the aggregator is enabled) and waits until
// the stack is complete.
func (d *Deployer) Deploy(ctx context.Context, stackName string, opts StackOptions, lambdaZip []byte) (Stack, error) {
	return Stack{}, errors.ErrUnsupported
}

// Status describes the stack.
func (d *Deployer) Status(ctx context.Context, stackName string) (Stack, error) {
	return Stack{}, errors.ErrUnsupported
}

// Delete deletes the stack and, when wait is true, waits until it is gone.
func (d *Deployer) Delete(ctx context.Context, stackName string, wait bool) error {
	return errors.ErrUnsupported
}
