package infra

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	limiter "github.com/zaelimiter/limiter"
)

func TestDefaultStackOptionsValid(t *testing.T) {
	require.NoError(t, DefaultStackOptions().Validate(), "DefaultStackOptions().Validate() =")
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*StackOptions)
		wantMsg string // a fragment of the one-line error
	}{
		{"timeout 0", func(o *StackOptions) { o.LambdaTimeout = 0 }, "LambdaTimeout 0: want 1-900 seconds"},
		{"timeout 901", func(o *StackOptions) { o.LambdaTimeout = 901 }, "LambdaTimeout 901"},
		{"memory 127", func(o *StackOptions) { o.LambdaMemory = 127 }, "LambdaMemory 127: want 128-3008 MB"},
		{"memory 3009", func(o *StackOptions) { o.LambdaMemory = 3009 }, "LambdaMemory 3009"},
		{"log retention 2", func(o *StackOptions) { o.LogRetentionDays = 2 }, "LogRetentionDays 2: want a CloudWatch Logs retention period"},
		{"log retention 0", func(o *StackOptions) { o.LogRetentionDays = 0 }, "LogRetentionDays 0"},
		{"pitr 36", func(o *StackOptions) { o.PITRRecoveryDays = 36 }, "PITRRecoveryDays 36: want 1-35 days"},
		{"pitr -1", func(o *StackOptions) { o.PITRRecoveryDays = -1 }, "PITRRecoveryDays -1"},
		{"glacier 0", func(o *StackOptions) { o.AuditArchiveGlacierDays = 0 }, "AuditArchiveGlacierDays 0: want 1-3650 days"},
		{"glacier 3651", func(o *StackOptions) { o.AuditArchiveGlacierDays = 3651 }, "AuditArchiveGlacierDays 3651"},
		{"threshold 0", func(o *StackOptions) { o.LambdaDurationThresholdPct = 0 }, "LambdaDurationThresholdPct 0: want 1-100 percent"},
		{"threshold 101", func(o *StackOptions) { o.LambdaDurationThresholdPct = 101 }, "LambdaDurationThresholdPct 101"},
		{"usage retention 0", func(o *StackOptions) { o.UsageRetentionDays = 0 }, "UsageRetentionDays 0"},
		{"audit retention 0", func(o *StackOptions) { o.AuditRetentionDays = 0 }, "AuditRetentionDays 0"},
		{"roles without IAM", func(o *StackOptions) { o.CreateIAMRoles, o.CreateIAM = true, false }, "CreateIAMRoles needs CreateIAM"},
		{"unknown window", func(o *StackOptions) { o.SnapshotWindows = "hourly,weekly" }, `unknown window "weekly"`},
		{"no window", func(o *StackOptions) { o.SnapshotWindows = " , " }, "SnapshotWindows"},
		{"role ARN", func(o *StackOptions) { o.AggregatorRoleARN = "arn:aws:iam::123:role/x" }, "AggregatorRoleARN"},
		{"topic ARN", func(o *StackOptions) { o.AlarmSNSTopic = "my-topic" }, "AlarmSNSTopic"},
		{"boundary ARN", func(o *StackOptions) { o.PermissionBoundary = "arn:aws:iam::123:policy" }, "PermissionBoundary"},
		{"boundary name", func(o *StackOptions) { o.PermissionBoundary = "bad name" }, "PermissionBoundary"},
		{"role format without {}", func(o *StackOptions) { o.RoleNameFormat = "PB-" }, "RoleNameFormat \"PB-\": want exactly one {} placeholder, found 0"},
		{"role format with two {}", func(o *StackOptions) { o.RoleNameFormat = "{}-{}" }, "found 2"},
		{"role format too long", func(o *StackOptions) { o.RoleNameFormat = strings.Repeat("x", 54) + "{}" }, "longer than 55"},
		{"policy format", func(o *StackOptions) { o.PolicyNameFormat = "x" }, "PolicyNameFormat"},
		{"aws: tag", func(o *StackOptions) { o.Tags = map[string]string{"aws:team": "x"} }, "aws: prefix is reserved"},
		{"long tag value", func(o *StackOptions) { o.Tags = map[string]string{"k": strings.Repeat("v", 257)} }, "longer than 256"},
		{"empty tag key", func(o *StackOptions) { o.Tags = map[string]string{"": "v"} }, "want 1-128 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultStackOptions()
			tc.mutate(&o)
			err := o.Validate()
			require.Error(t, err, "Validate() = nil, want an error containing %q", tc.wantMsg)
			assert.ErrorIs(t, err, ErrInvalidOptions)
			assert.ErrorContains(t, err, tc.wantMsg)
			assert.NotContains(t, err.Error(), "\n", "Validate(): one line")
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*StackOptions)
	}{
		{"bounds", func(o *StackOptions) {
			o.LambdaTimeout, o.LambdaMemory, o.PITRRecoveryDays, o.AuditArchiveGlacierDays, o.LambdaDurationThresholdPct = 900, 3008, 35, 3650, 100
		}},
		{"low bounds", func(o *StackOptions) {
			o.LambdaTimeout, o.LambdaMemory, o.PITRRecoveryDays, o.AuditArchiveGlacierDays, o.LambdaDurationThresholdPct = 1, 128, 1, 1, 1
		}},
		{"every retention period", func(o *StackOptions) { o.LogRetentionDays = 3653 }},
		{"monthly", func(o *StackOptions) { o.SnapshotWindows = "hourly, daily,monthly" }},
		{"external role without IAM", func(o *StackOptions) {
			o.CreateIAM, o.AggregatorRoleARN = false, "arn:aws:iam::123456789012:role/aggr"
		}},
		{"boundary by name and ARN", func(o *StackOptions) { o.PermissionBoundary = "PowerUserBoundary" }},
		{"boundary ARN", func(o *StackOptions) { o.PermissionBoundary = "arn:aws:iam::123456789012:policy/PB" }},
		{"formats", func(o *StackOptions) { o.RoleNameFormat, o.PolicyNameFormat = "PB-{}", "{}-policy" }},
		{"topic", func(o *StackOptions) { o.AlarmSNSTopic = "arn:aws:sns:us-east-1:123456789012:alarms" }},
		{"tags", func(o *StackOptions) { o.Tags = map[string]string{"team": "ml", "env": ""} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultStackOptions()
			tc.mutate(&o)
			err := o.Validate()
			assert.NoError(t, err, "Validate()")
		})
	}
}

func TestParameters(t *testing.T) {
	o := DefaultStackOptions()
	o.LambdaTimeout, o.LambdaDurationThresholdPct = 120, 75
	o.RoleNameFormat, o.PolicyNameFormat = "PB-{}", "{}-pol"
	o.PITRRecoveryDays = 7
	p, err := o.Parameters("my-stack")
	require.NoError(t, err)
	for k, want := range map[string]string{
		"LambdaDurationThreshold":       "90000", // 75 % of 120 s, in ms
		"AggregatorRoleName":            "PB-my-stack-aggr",
		"AppRoleName":                   "PB-my-stack-app",
		"AdminRoleName":                 "PB-my-stack-admin",
		"ReadOnlyRoleName":              "PB-my-stack-read",
		"AcquireOnlyPolicyName":         "my-stack-acq-pol",
		"FullAccessPolicyName":          "my-stack-full-pol",
		"ReadOnlyPolicyName":            "my-stack-read-pol",
		"NamespaceAcquirePolicyName":    "my-stack-ns-acq-pol",
		"NamespaceFullAccessPolicyName": "my-stack-ns-full-pol",
		"NamespaceReadOnlyPolicyName":   "my-stack-ns-read-pol",
		"RoleNameFormat":                "PB-{}",
		"PITRRecoveryPeriodDays":        "7",
		"SchemaVersion":                 limiter.SchemaVersion,
		"EnableIAMRoles":                "false",
		"EnableIAM":                     "true",
	} {
		assert.Equal(t, want, p[k], "%s = %q, want %q", k, p[k], want)
	}
	if d := DefaultStackOptions(); true {
		p, _ := d.Parameters("s")
		assert.Equal(t, "", p["PITRRecoveryPeriodDays"], "p[\"PITRRecoveryPeriodDays\"]")
		assert.Equal(t, "", p["AggregatorRoleName"], "p[\"AggregatorRoleName\"]")
	}
}

func TestParametersRejects(t *testing.T) {
	o := DefaultStackOptions()
	for name, tc := range map[string]struct {
		stack string
		opts  StackOptions
		want  error
	}{
		"bad stack name": {"my_stack", o, limiter.ErrValidation},
		"long role name": {strings.Repeat("a", 55), func() StackOptions { o := o; o.RoleNameFormat = "Boundary-{}"; return o }(), ErrInvalidOptions},
		"invalid option": {"ok", func() StackOptions { o := o; o.LambdaMemory = 1; return o }(), ErrInvalidOptions},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.opts.Parameters(tc.stack)
			assert.ErrorIs(t, err, tc.want, "Parameters(%q) = %v, want %v and ErrInvalidOptions", tc.stack, err, tc.want)
			assert.ErrorIs(t, err, ErrInvalidOptions, "Parameters(%q) = %v, want %v and ErrInvalidOptions", tc.stack, err, tc.want)
		})
	}
}

func TestCheckZip(t *testing.T) {
	err := checkZip(testZip(t, "exit 0"))
	assert.NoError(t, err, "checkZip(zip with bootstrap)")
	assert.ErrorIs(t, checkZip([]byte("not a zip")), ErrInvalidOptions, "checkZip(garbage)")
}
