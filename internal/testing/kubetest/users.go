package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// User is a set of credentials for the cluster: a rest.Config for in-process
// clients and a kubeconfig file for child processes (KUBECONFIG=...).
type User struct {
	Name       string
	Config     *rest.Config
	Kubeconfig string

	cluster *Cluster
	creds   keyPair
}

// User issues credentials for name, member of groups. RBAC grants such a user
// nothing until a binding names it.
func (c *Cluster) User(name string, groups ...string) (*User, error) {
	creds, err := c.ca.client(name, groups)
	if err != nil {
		return nil, err
	}
	return c.newUser(name, c.host, creds, "")
}

func (c *Cluster) newUser(name, host string, creds keyPair, suffix string) (*User, error) {
	u := &User{Name: name, Config: c.restConfig(host, creds), cluster: c, creds: creds}
	u.Kubeconfig = filepath.Join(c.dir, "kubeconfig-"+name+suffix)
	if err := writeKubeconfig(u.Kubeconfig, u.Config); err != nil {
		return nil, err
	}
	return u, nil
}

// Through returns the same user's credentials routed through p, so that
// cutting p partitions exactly this client from the apiserver.
func (u *User) Through(p *Proxy) (*User, error) {
	return u.cluster.newUser(u.Name, "https://"+p.Addr(), u.creds, "-via-"+p.Port())
}

// UserWithRole creates role in namespace, binds it to a new user named after
// the role, and returns that user once the apiserver's authorizer has seen
// the binding (RBAC is served from an informer cache, so a binding takes
// effect a moment after it is written).
func (c *Cluster) UserWithRole(ctx context.Context, namespace string, role *rbacv1.Role) (*User, error) {
	cs := c.Clientset()
	role = role.DeepCopy()
	role.Namespace = namespace
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create role: %w", err)
	}
	name := "user-" + role.Name
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create role binding: %w", err)
	}
	u, err := c.User(name)
	if err != nil {
		return nil, err
	}
	if len(role.Rules) == 0 || len(role.Rules[0].Verbs) == 0 {
		return u, nil
	}
	// Wait until the first rule is in force.
	rule := role.Rules[0]
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: name,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: rule.Verbs[0], Group: first(rule.APIGroups),
			Resource: first(rule.Resources), Name: first(rule.ResourceNames),
		},
	}}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("role %s/%s never took effect for %s: %w", namespace, role.Name, name, err)
	}
	return u, nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "user", Namespace: "default"}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
