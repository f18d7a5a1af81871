package infra

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// ErrInvalidOptions is matched (errors.Is) by every error of
// [StackOptions.Validate] and [StackOptions.Parameters].
var ErrInvalidOptions = errors.New("infra: invalid stack options")

// StackOptions are the stack's parameters.
// Start from [DefaultStackOptions]: a zero StackOptions does not validate.
// It is a plain value.
type StackOptions struct {
	SnapshotWindows            string // comma-separated hourly, daily, monthly; default "hourly,daily"
	UsageRetentionDays         int    // snapshot retention, 1–3650, default 90
	AuditRetentionDays         int    // > 0, default 90; not a template parameter (the client's audit TTL)
	EnableAggregator           bool   // default true
	PITRRecoveryDays           int    // 1–35; 0 means the AWS default (35)
	LogRetentionDays           int    // a CloudWatch retention period, default 30
	LambdaTimeout              int    // seconds, 1–900, default 60
	LambdaMemory               int    // MB, 128–3008, default 256
	EnableAlarms               bool   // default true
	AlarmSNSTopic              string // optional topic ARN
	LambdaDurationThresholdPct int    // of LambdaTimeout, 1–100, default 80
	PermissionBoundary         string // policy name or ARN
	RoleNameFormat             string // "{}" is replaced by the default name, e.g. "PB-{}" → "PB-{stack}-aggr"
	PolicyNameFormat           string // "{}" is replaced by the default name, e.g. "PB-{}" → "PB-{stack}-acq"
	EnableAuditArchival        bool   // default true
	AuditArchiveGlacierDays    int    // 1–3650, default 90
	EnableTracing              bool
	CreateIAMRoles             bool // app, admin and read-only roles; needs CreateIAM
	CreateIAM                  bool // default true
	AggregatorRoleARN          string
	EnableDeletionProtection   bool
	// EnableProvisioner deploys the provisioner Lambda
	// ({stack}-limits-provisioner, export {stack}-ProvisionerArn) that
	// serves Custom::ZaeLimiterLimits; needs CreateIAM (its role) and its
	// code ([DeployerOptions.ProvisionerZip]). Default false.
	EnableProvisioner bool
	Tags              map[string]string
}

// DefaultStackOptions returns the defaults listed on [StackOptions].
func DefaultStackOptions() StackOptions {
	return StackOptions{
		SnapshotWindows:            "hourly,daily",
		UsageRetentionDays:         90,
		AuditRetentionDays:         90,
		EnableAggregator:           true,
		LogRetentionDays:           30,
		LambdaTimeout:              60,
		LambdaMemory:               256,
		EnableAlarms:               true,
		LambdaDurationThresholdPct: 80,
		EnableAuditArchival:        true,
		AuditArchiveGlacierDays:    90,
		CreateIAM:                  true,
	}
}

// LogRetentionPeriods are the retention periods (days) CloudWatch Logs
// accepts for [StackOptions.LogRetentionDays].
var LogRetentionPeriods = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

var (
	roleARNPattern     = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):iam::\d{12}:role/.+$`)
	policyARNPattern   = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):iam::(\d{12}|aws):policy/.+$`)
	policyNamePattern  = regexp.MustCompile(`^[\w+=,.@/-]{1,128}$`)
	snsTopicARNPattern = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$`)
)

const (
	maxRoleFormat   = 55 // 64 − the longest component ("-admin" plus a dash) − margin
	maxPolicyFormat = 120
	maxUserTags     = 45 // 50 per stack, minus the managed tags
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

func between(name string, v, lo, hi int, unit string) error {
	if v < lo || v > hi {
		return invalid("%s %d: want %d-%d%s", name, v, lo, hi, unit)
	}
	return nil
}

// Validate reports the first invalid option as a one-line error matching
// [ErrInvalidOptions].
func (o StackOptions) Validate() error {
	if err := validateWindows(o.SnapshotWindows); err != nil {
		return err
	}
	checks := []error{
		between("UsageRetentionDays", o.UsageRetentionDays, 1, 3650, " days"),
		between("LambdaTimeout", o.LambdaTimeout, 1, 900, " seconds"),
		between("LambdaMemory", o.LambdaMemory, 128, 3008, " MB"),
		between("LambdaDurationThresholdPct", o.LambdaDurationThresholdPct, 1, 100, " percent"),
		between("AuditArchiveGlacierDays", o.AuditArchiveGlacierDays, 1, 3650, " days"),
	}
	if o.PITRRecoveryDays != 0 {
		checks = append(checks, between("PITRRecoveryDays", o.PITRRecoveryDays, 1, 35, " days (0 for the AWS default)"))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	switch {
	case o.AuditRetentionDays <= 0:
		return invalid("AuditRetentionDays %d: want a positive number of days", o.AuditRetentionDays)
	case !slices.Contains(LogRetentionPeriods, o.LogRetentionDays):
		return invalid("LogRetentionDays %d: want a CloudWatch Logs retention period (%s)", o.LogRetentionDays, joinInts(LogRetentionPeriods))
	case o.AlarmSNSTopic != "" && !snsTopicARNPattern.MatchString(o.AlarmSNSTopic):
		return invalid("AlarmSNSTopic %q: want an SNS topic ARN", o.AlarmSNSTopic)
	case o.PermissionBoundary != "" && strings.HasPrefix(o.PermissionBoundary, "arn:") && !policyARNPattern.MatchString(o.PermissionBoundary):
		return invalid("PermissionBoundary %q: want an IAM policy ARN or a policy name", o.PermissionBoundary)
	case o.PermissionBoundary != "" && !strings.HasPrefix(o.PermissionBoundary, "arn:") && !policyNamePattern.MatchString(o.PermissionBoundary):
		return invalid("PermissionBoundary %q: want an IAM policy ARN or a policy name", o.PermissionBoundary)
	case o.CreateIAMRoles && !o.CreateIAM:
		return invalid("CreateIAMRoles needs CreateIAM (roles are IAM resources)")
	case o.EnableProvisioner && !o.CreateIAM:
		return invalid("EnableProvisioner needs CreateIAM (the provisioner's role is an IAM resource)")
	case o.AggregatorRoleARN != "" && !roleARNPattern.MatchString(o.AggregatorRoleARN):
		return invalid("AggregatorRoleARN %q: want an IAM role ARN (arn:aws:iam::123456789012:role/name)", o.AggregatorRoleARN)
	}
	if err := validateFormat("RoleNameFormat", o.RoleNameFormat, maxRoleFormat); err != nil {
		return err
	}
	if err := validateFormat("PolicyNameFormat", o.PolicyNameFormat, maxPolicyFormat); err != nil {
		return err
	}
	return validateTags(o.Tags)
}

func validateWindows(s string) error {
	known := []string{store.WindowHourly, store.WindowDaily, store.WindowMonthly}
	n := 0
	for w := range strings.SplitSeq(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if !slices.Contains(known, w) {
			return invalid("SnapshotWindows %q: unknown window %q (want %s)", s, w, strings.Join(known, ", "))
		}
		n++
	}
	if n == 0 {
		return invalid("SnapshotWindows %q: want at least one of %s", s, strings.Join(known, ", "))
	}
	return nil
}

func validateFormat(field, format string, maxLen int) error {
	if format == "" {
		return nil
	}
	if n := strings.Count(format, "{}"); n != 1 {
		return invalid("%s %q: want exactly one {} placeholder, found %d", field, format, n)
	}
	if len(format) > maxLen {
		return invalid("%s %q: longer than %d characters", field, format, maxLen)
	}
	return nil
}

func validateTags(tags map[string]string) error {
	if len(tags) > maxUserTags {
		return invalid("Tags: %d tags, want at most %d (50 per stack, %d are managed)", len(tags), maxUserTags, 50-maxUserTags)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := tags[k]; {
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return invalid("tag key %q: the aws: prefix is reserved", k)
		case len(k) < 1 || len(k) > 128:
			return invalid("tag key %q: want 1-128 characters", k)
		case len(v) > 256:
			return invalid("tag %q: value longer than 256 characters", k)
		}
	}
	return nil
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// DeploysAggregator reports whether the stack gets the aggregator Lambda:
// the template's DeployAggregatorLambda condition, EnableAggregator and a
// role for it (CreateIAM, or AggregatorRoleARN).
func (o StackOptions) DeploysAggregator() bool {
	return o.EnableAggregator && (o.CreateIAM || o.AggregatorRoleARN != "")
}

// DeploysProvisioner reports whether the stack gets the provisioner
// Lambda: EnableProvisioner and CreateIAM (the template's
// DeployProvisionerLambda condition).
func (o StackOptions) DeploysProvisioner() bool { return o.EnableProvisioner && o.CreateIAM }

// Template parameter names.
const (
	ParamCodeS3Bucket            = "AggregatorCodeS3Bucket"
	ParamCodeS3Key               = "AggregatorCodeS3Key"
	ParamProvisionerCodeS3Bucket = "ProvisionerCodeS3Bucket"
	ParamProvisionerCodeS3Key    = "ProvisionerCodeS3Key"
)

// Parameters returns the template parameters for stackName (every
// parameter of the template but the code locations of the aggregator and the
// provisioner, which [Deployer.Deploy] adds). It validates o and the names derived from
// RoleNameFormat and PolicyNameFormat.
func (o StackOptions) Parameters(stackName string) (map[string]string, error) {
	if err := ddbschema.ValidateStackName(stackName); err != nil {
		return nil, fmt.Errorf("%w: stack name %q: %w", ErrInvalidOptions, stackName, err)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := strconv.FormatBool
	itoa := strconv.Itoa
	pitr := ""
	if o.PITRRecoveryDays != 0 {
		pitr = itoa(o.PITRRecoveryDays)
	}
	p := map[string]string{
		"SnapshotWindows":                   o.SnapshotWindows,
		"SnapshotRetentionDays":             itoa(o.UsageRetentionDays),
		"LambdaMemorySize":                  itoa(o.LambdaMemory),
		"LambdaTimeout":                     itoa(o.LambdaTimeout),
		"EnableAggregator":                  b(o.EnableAggregator),
		"SchemaVersion":                     limiter.SchemaVersion,
		"PITRRecoveryPeriodDays":            pitr,
		"EnableAlarms":                      b(o.EnableAlarms),
		"AlarmSNSTopicArn":                  o.AlarmSNSTopic,
		"LogRetentionDays":                  itoa(o.LogRetentionDays),
		"LambdaDurationThreshold":           itoa(o.LambdaTimeout * 1000 * o.LambdaDurationThresholdPct / 100),
		"PermissionBoundary":                o.PermissionBoundary,
		"RoleNameFormat":                    o.RoleNameFormat,
		"EnableAuditArchival":               b(o.EnableAuditArchival),
		"AuditArchiveGlacierTransitionDays": itoa(o.AuditArchiveGlacierDays),
		"EnableTracing":                     b(o.EnableTracing),
		"EnableIAMRoles":                    b(o.CreateIAMRoles),
		"EnableIAM":                         b(o.CreateIAM),
		"AggregatorRoleArn":                 o.AggregatorRoleARN,
		"EnableDeletionProtection":          b(o.EnableDeletionProtection),
		"EnableProvisioner":                 b(o.EnableProvisioner),
	}
	for param, component := range map[string]string{
		"AggregatorRoleName": "aggr", "AppRoleName": "app", "AdminRoleName": "admin", "ReadOnlyRoleName": "read",
		"ProvisionerRoleName": "prov",
	} {
		name, err := formatName("RoleNameFormat", o.RoleNameFormat, stackName, component, 64)
		if err != nil {
			return nil, err
		}
		p[param] = name
	}
	for param, component := range map[string]string{
		"AcquireOnlyPolicyName": "acq", "FullAccessPolicyName": "full", "ReadOnlyPolicyName": "read",
		"NamespaceAcquirePolicyName": "ns-acq", "NamespaceFullAccessPolicyName": "ns-full", "NamespaceReadOnlyPolicyName": "ns-read",
	} {
		name, err := formatName("PolicyNameFormat", o.PolicyNameFormat, stackName, component, 128)
		if err != nil {
			return nil, err
		}
		p[param] = name
	}
	return p, nil
}

// formatName applies format to "{stack}-{component}"; "" when format is "".
func formatName(field, format, stack, component string, maxLen int) (string, error) {
	if format == "" {
		return "", nil
	}
	name := strings.Replace(format, "{}", stack+"-"+component, 1)
	if len(name) > maxLen {
		return "", invalid("%s %q: name %q is %d characters, IAM allows %d (shorten the stack name or the format)", field, format, name, len(name), maxLen)
	}
	return name, nil
}
