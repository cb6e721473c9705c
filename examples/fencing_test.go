package examples_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fencepolicy"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// fencedConfigMap is the ConfigMap the examples keep with FENCED_CONFIGMAP.
const fencedConfigMap = "worker-state"

// TestExamplesFencedConfigMap runs each example with FENCED_CONFIGMAP, as
// its pod's ServiceAccount (create and patch on configmaps, nothing else),
// under the policy of `leasehold fencing-policy` for its Lease, next to a
// sidecar with LEASEHOLD_FENCING_FLOOR=true. The example's writes land
// with the term's token, labelled and annotated as the policy wants; once
// a newer writer has stamped the ConfigMap with a larger token, the
// apiserver refuses the example's next write (rule 2: its token is older
// than the stored one) and the example stops working for that term,
// though its sidecar still leads: no write of it lands any more, it waits
// on the watch, and it exits 0 on SIGTERM.
func TestExamplesFencedConfigMap(t *testing.T) {
	kubetest.Require(t, cluster)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) { testFencedConfigMap(t, ex) })
	}
}

func testFencedConfigMap(t *testing.T, ex example) {
	argv := ex.command(t)
	var env []string
	if ex.name == "shell" {
		// The shell example's fenced write runs kubectl: the one built
		// beside the apiserver, first on its PATH.
		kubectl, err := kubetest.Kubectl()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	ctx := t.Context()
	ns, err := cluster.CreateNamespace(ctx, "fenced-"+ex.name)
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{
		Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: leaseName,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Env: []string{"LEASEHOLD_FENCING_FLOOR=true"}, Dir: t.TempDir(),
	}
	inst, err := f.Start(ctx, "pod", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log: %s", inst.LogPath)
		}
	})
	token := uint64(awaitLeadership(t, inst).Status.FencingToken)
	installFencingPolicy(t, ns)

	store := newStore(t)
	w := startWorker(t, argv, inst.APIURL, store.URL+"/write", ex.name,
		append(append(serviceAccountEnv(t, ns), "FENCED_CONFIGMAP="+fencedConfigMap), env...)...)
	configMaps := cluster.Clientset().CoreV1().ConfigMaps(ns)

	// 1. The example's writes land, stamped with the term's token.
	var cm *corev1.ConfigMap
	poll.UntilReport(t, generous, 10*time.Millisecond, "the example's fenced write", func() bool {
		cm, err = configMaps.Get(ctx, fencedConfigMap, metav1.GetOptions{})
		return err == nil
	}, func() string { return err.Error() })
	if got := cm.Annotations[fencepolicy.TokenAnnotation]; got != strconv.FormatUint(token, 10) {
		t.Errorf("the ConfigMap carries token %q, want the term's %d", got, token)
	}
	if cm.Labels[fencepolicy.FencedByLabel] != leaseName || cm.Data["writer"] != ex.name {
		t.Errorf("the ConfigMap: labels %v, data %v; want fenced by %s, written by %s", cm.Labels, cm.Data, leaseName, ex.name)
	}
	first := cm.Data["write"]
	poll.Until(t, generous, 10*time.Millisecond, "the example's next fenced writes", func() bool {
		cm, err = configMaps.Get(ctx, fencedConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data["write"] != first
	})

	// 2. A newer writer stamps the ConfigMap with a larger token (as a
	// successor would). The example's next write carries its own, now
	// older, token: refused, and the example stops although its sidecar
	// still leads. Its watch blocking is what shows it left its write loop;
	// meanwhile, and after, the newer write stays.
	newer := strconv.FormatUint(token+1_000_000, 10)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := configMaps.Get(ctx, fencedConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Annotations[fencepolicy.TokenAnnotation] = newer
		cm.Data = map[string]string{"writer": "newer leader"}
		_, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("the newer writer's update: %v", err)
	}
	newerStays := func() {
		cm, err := configMaps.Get(ctx, fencedConfigMap, metav1.GetOptions{})
		if err != nil || cm.Data["writer"] != "newer leader" || cm.Annotations[fencepolicy.TokenAnnotation] != newer {
			t.Fatalf("after the newer writer's update (token %s): %v, %v %v; a stale write landed", newer, err, cm.Annotations, cm.Data)
		}
	}
	awaitBlockedWatch(t, inst, newerStays)
	newerStays()
	if st, err := inst.Status(ctx); err != nil || !st.Leader || uint64(st.FencingToken) != token {
		t.Errorf("sidecar status %+v, %v: want still leading with token %d (else the refusal was not what stopped the example)", st, err, token)
	}
	log, err := os.ReadFile(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	refused := "apiserver refused token " + strconv.FormatUint(token, 10) + ": "
	i := strings.Index(string(log), refused)
	if i < 0 {
		t.Fatalf("the example's log does not say that the apiserver refused token %d:\n%s", token, log)
	}
	line, _, _ := strings.Cut(string(log[i:]), "\n")
	if !strings.Contains(line, "leasehold fencing rule 2") {
		t.Errorf("the refusal the example logged is not rule 2's: %s", line)
	}
	t.Logf("fenced writes landed with token %d until the newer token %s was stored; then the example logged: %s", token, newer, line)
	w.terminate(t)
}

// installFencingPolicy creates, as admin, the policy and binding of
// `leasehold fencing-policy --lease <leaseName> --namespace ns` (deleted
// when the test ends: they are cluster-scoped), and returns once the
// apiserver enforces them on the namespace with the Lease in view: a
// labelled ConfigMap without a token is refused by rule 1.
func installFencingPolicy(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	policy, binding := fencepolicy.Objects(fencepolicy.Options{Lease: leaseName, Namespace: ns, Resources: fencepolicy.DefaultResources})
	admission := cluster.Clientset().AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{fencepolicy.FencedByLabel: leaseName}}}
	poll.Until(t, generous, 20*time.Millisecond, "the fencing policy in force", func() bool {
		_, err := cluster.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "leasehold fencing rule 1")
	})
}

// serviceAccountEnv makes the ServiceAccount worker in ns, allowed to
// create and patch ConfigMaps there (what a server-side apply needs), and
// returns the environment that gives an example its credentials as in a
// pod: KUBERNETES_SERVICE_HOST and _PORT with SERVICEACCOUNT_DIR (token,
// ca.crt: the Python and Node.js examples), and KUBECONFIG (the same token:
// kubectl and client-go, which in a pod find the ServiceAccount by
// themselves).
func serviceAccountEnv(t *testing.T, ns string) []string {
	t.Helper()
	ctx := t.Context()
	cs := cluster.Clientset()
	const name = "worker"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch"}},
	}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := cluster.Admin().Config.CAData
	for file, data := range map[string][]byte{"token": []byte(tok.Status.Token), "ca.crt": ca, "namespace": []byte(ns)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cluster.Host(), CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "kubetest"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	host, err := url.Parse(cluster.Host())
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"KUBERNETES_SERVICE_HOST=" + host.Hostname(), "KUBERNETES_SERVICE_PORT=" + host.Port(), "SERVICEACCOUNT_DIR=" + dir,
		"KUBECONFIG=" + kubeconfig, "KUBECACHEDIR=" + filepath.Join(dir, "cache"),
	}
}
