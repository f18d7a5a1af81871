package motoserver

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServerAnswers: the shared server answers an AWS API call with moto's
// default account.
func TestServerAnswers(t *testing.T) {
	out, err := sts.NewFromConfig(Config(t)).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
	require.NoError(t, err)
	assert.Equal(t, "123456789012", *out.Account, "account")
}
