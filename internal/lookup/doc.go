// Package lookup is what oria's controllers (and the admission guard) look
// up in the cluster, through a manager's cache or the API server's
// discovery: the cache indexes they query (registered once per manager by
// SetupIndexes), an instance's bindings (InstanceBindings), the CRDs of an
// extension (ExtensionCRDs), the metadata-only types oria caches CRDs,
// Namespaces and bundle ClusterRoles as, and whether an API is namespaced
// (APIScopes). It does not build the manager or its caches (internal/manager
// does, with these types) and maps no events to requests (internal/watch).
package lookup
