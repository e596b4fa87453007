//! The PostgreSQL 15 column lists of every `pg_catalog` and `information_schema` relation Eddy
//! serves. Clients select columns by name, so every column psql 15, pgjdbc, SQLAlchemy and the
//! BI tools read is present, even when Eddy always fills it with a constant.

use super::table::{RelDef, Ty::*};

macro_rules! rel {
    ($id:ident, $name:literal, $oid:literal, $kind:literal, [$(($c:literal, $t:expr)),* $(,)?]) => {
        /// The relation of the same name.
        pub static $id: RelDef = RelDef { name: $name, oid: $oid, kind: $kind, cols: &[$(($c, $t)),*] };
    };
}

rel!(PG_CLASS, "pg_class", 1259, 'r', [
    ("oid", Oid), ("relname", Name), ("relnamespace", Oid), ("reltype", Oid), ("reloftype", Oid),
    ("relowner", Oid), ("relam", Oid), ("relfilenode", Oid), ("reltablespace", Oid), ("relpages", I4),
    ("reltuples", F4), ("relallvisible", I4), ("reltoastrelid", Oid), ("relhasindex", Bool),
    ("relisshared", Bool), ("relpersistence", Char), ("relkind", Char), ("relnatts", I2), ("relchecks", I2),
    ("relhasrules", Bool), ("relhastriggers", Bool), ("relhassubclass", Bool), ("relrowsecurity", Bool),
    ("relforcerowsecurity", Bool), ("relispopulated", Bool), ("relreplident", Char), ("relispartition", Bool),
    ("relrewrite", Oid), ("relfrozenxid", I4), ("relminmxid", I4), ("relacl", TextArr), ("reloptions", TextArr),
    ("relpartbound", Text),
]);

rel!(PG_NAMESPACE, "pg_namespace", 2615, 'r', [("oid", Oid), ("nspname", Name), ("nspowner", Oid), ("nspacl", TextArr)]);

rel!(PG_ATTRIBUTE, "pg_attribute", 1249, 'r', [
    ("attrelid", Oid), ("attname", Name), ("atttypid", Oid), ("attstattarget", I4), ("attlen", I2),
    ("attnum", I2), ("attndims", I4), ("attcacheoff", I4), ("atttypmod", I4), ("attbyval", Bool),
    ("attalign", Char), ("attstorage", Char), ("attcompression", Char), ("attnotnull", Bool),
    ("atthasdef", Bool), ("atthasmissing", Bool), ("attidentity", Char), ("attgenerated", Char),
    ("attisdropped", Bool), ("attislocal", Bool), ("attinhcount", I4), ("attcollation", Oid),
    ("attacl", TextArr), ("attoptions", TextArr), ("attfdwoptions", TextArr), ("attmissingval", TextArr),
]);

rel!(PG_TYPE, "pg_type", 1247, 'r', [
    ("oid", Oid), ("typname", Name), ("typnamespace", Oid), ("typowner", Oid), ("typlen", I2),
    ("typbyval", Bool), ("typtype", Char), ("typcategory", Char), ("typispreferred", Bool),
    ("typisdefined", Bool), ("typdelim", Char), ("typrelid", Oid), ("typsubscript", Regproc),
    ("typelem", Oid), ("typarray", Oid), ("typinput", Regproc), ("typoutput", Regproc),
    ("typreceive", Regproc), ("typsend", Regproc), ("typmodin", Regproc), ("typmodout", Regproc),
    ("typanalyze", Regproc), ("typalign", Char), ("typstorage", Char), ("typnotnull", Bool),
    ("typbasetype", Oid), ("typtypmod", I4), ("typndims", I4), ("typcollation", Oid),
    ("typdefaultbin", Text), ("typdefault", Text), ("typacl", TextArr),
]);

rel!(PG_ATTRDEF, "pg_attrdef", 2604, 'r', [("oid", Oid), ("adrelid", Oid), ("adnum", I2), ("adbin", Text)]);

rel!(PG_INDEX, "pg_index", 2610, 'r', [
    ("indexrelid", Oid), ("indrelid", Oid), ("indnatts", I2), ("indnkeyatts", I2), ("indisunique", Bool),
    ("indnullsnotdistinct", Bool), ("indisprimary", Bool), ("indisexclusion", Bool), ("indimmediate", Bool),
    ("indisclustered", Bool), ("indisvalid", Bool), ("indcheckxmin", Bool), ("indisready", Bool),
    ("indislive", Bool), ("indisreplident", Bool), ("indkey", I2Arr), ("indcollation", OidArr),
    ("indclass", OidArr), ("indoption", I2Arr), ("indexprs", Text), ("indpred", Text),
]);

rel!(PG_CONSTRAINT, "pg_constraint", 2606, 'r', [
    ("oid", Oid), ("conname", Name), ("connamespace", Oid), ("contype", Char), ("condeferrable", Bool),
    ("condeferred", Bool), ("convalidated", Bool), ("conrelid", Oid), ("contypid", Oid), ("conindid", Oid),
    ("conparentid", Oid), ("confrelid", Oid), ("confupdtype", Char), ("confdeltype", Char),
    ("confmatchtype", Char), ("conislocal", Bool), ("coninhcount", I4), ("connoinherit", Bool),
    ("conkey", I2Arr), ("confkey", I2Arr), ("conpfeqop", OidArr), ("conppeqop", OidArr),
    ("conffeqop", OidArr), ("confdelsetcols", I2Arr), ("conexclop", OidArr), ("conbin", Text),
]);

rel!(PG_DESCRIPTION, "pg_description", 2609, 'r', [("objoid", Oid), ("classoid", Oid), ("objsubid", I4), ("description", Text)]);

rel!(PG_DATABASE, "pg_database", 1262, 'r', [
    ("oid", Oid), ("datname", Name), ("datdba", Oid), ("encoding", I4), ("datlocprovider", Char),
    ("datistemplate", Bool), ("datallowconn", Bool), ("datconnlimit", I4), ("datfrozenxid", I4),
    ("datminmxid", I4), ("dattablespace", Oid), ("datcollate", Text), ("datctype", Text),
    ("daticulocale", Text), ("datcollversion", Text), ("datacl", TextArr),
]);

rel!(PG_ROLES, "pg_roles", 12001, 'v', [
    ("rolname", Name), ("rolsuper", Bool), ("rolinherit", Bool), ("rolcreaterole", Bool), ("rolcreatedb", Bool),
    ("rolcanlogin", Bool), ("rolreplication", Bool), ("rolconnlimit", I4), ("rolpassword", Text),
    ("rolvaliduntil", Ts), ("rolbypassrls", Bool), ("rolconfig", TextArr), ("oid", Oid),
]);

rel!(PG_AUTHID, "pg_authid", 1260, 'r', [
    ("oid", Oid), ("rolname", Name), ("rolsuper", Bool), ("rolinherit", Bool), ("rolcreaterole", Bool),
    ("rolcreatedb", Bool), ("rolcanlogin", Bool), ("rolreplication", Bool), ("rolbypassrls", Bool),
    ("rolconnlimit", I4), ("rolpassword", Text), ("rolvaliduntil", Ts),
]);

rel!(PG_USER, "pg_user", 12002, 'v', [
    ("usename", Name), ("usesysid", Oid), ("usecreatedb", Bool), ("usesuper", Bool), ("userepl", Bool),
    ("usebypassrls", Bool), ("passwd", Text), ("valuntil", Ts), ("useconfig", TextArr),
]);

rel!(PG_AUTH_MEMBERS, "pg_auth_members", 1261, 'r', [("roleid", Oid), ("member", Oid), ("grantor", Oid), ("admin_option", Bool)]);

rel!(PG_SETTINGS, "pg_settings", 12003, 'v', [
    ("name", Text), ("setting", Text), ("unit", Text), ("category", Text), ("short_desc", Text),
    ("extra_desc", Text), ("context", Text), ("vartype", Text), ("source", Text), ("min_val", Text),
    ("max_val", Text), ("enumvals", TextArr), ("boot_val", Text), ("reset_val", Text), ("sourcefile", Text),
    ("sourceline", I4), ("pending_restart", Bool),
]);

rel!(PG_PROC, "pg_proc", 1255, 'r', [
    ("oid", Oid), ("proname", Name), ("pronamespace", Oid), ("proowner", Oid), ("prolang", Oid),
    ("procost", F4), ("prorows", F4), ("provariadic", Oid), ("prosupport", Regproc), ("prokind", Char),
    ("prosecdef", Bool), ("proleakproof", Bool), ("proisstrict", Bool), ("proretset", Bool),
    ("provolatile", Char), ("proparallel", Char), ("pronargs", I2), ("pronargdefaults", I2),
    ("prorettype", Oid), ("proargtypes", OidArr), ("proallargtypes", OidArr), ("proargmodes", TextArr),
    ("proargnames", TextArr), ("proargdefaults", Text), ("protrftypes", OidArr), ("prosrc", Text),
    ("probin", Text), ("prosqlbody", Text), ("proconfig", TextArr), ("proacl", TextArr),
]);

rel!(PG_AM, "pg_am", 2601, 'r', [("oid", Oid), ("amname", Name), ("amhandler", Regproc), ("amtype", Char)]);

rel!(PG_RANGE, "pg_range", 3541, 'r', [
    ("rngtypid", Oid), ("rngsubtype", Oid), ("rngmultitypid", Oid), ("rngcollation", Oid),
    ("rngsubopc", Oid), ("rngcanonical", Regproc), ("rngsubdiff", Regproc),
]);

rel!(PG_ENUM, "pg_enum", 3501, 'r', [("oid", Oid), ("enumtypid", Oid), ("enumsortorder", F4), ("enumlabel", Name)]);

rel!(PG_EXTENSION, "pg_extension", 3079, 'r', [
    ("oid", Oid), ("extname", Name), ("extowner", Oid), ("extnamespace", Oid), ("extrelocatable", Bool),
    ("extversion", Text), ("extconfig", OidArr), ("extcondition", TextArr),
]);

rel!(PG_COLLATION, "pg_collation", 3456, 'r', [
    ("oid", Oid), ("collname", Name), ("collnamespace", Oid), ("collowner", Oid), ("collprovider", Char),
    ("collisdeterministic", Bool), ("collencoding", I4), ("collcollate", Text), ("collctype", Text),
    ("colliculocale", Text), ("collversion", Text),
]);

rel!(PG_REWRITE, "pg_rewrite", 2618, 'r', [
    ("oid", Oid), ("rulename", Name), ("ev_class", Oid), ("ev_type", Char), ("ev_enabled", Char),
    ("is_instead", Bool), ("ev_qual", Text), ("ev_action", Text),
]);

rel!(PG_INHERITS, "pg_inherits", 2611, 'r', [("inhrelid", Oid), ("inhparent", Oid), ("inhseqno", I4), ("inhdetachpending", Bool)]);

rel!(PG_TABLES, "pg_tables", 12004, 'v', [
    ("schemaname", Name), ("tablename", Name), ("tableowner", Name), ("tablespace", Name),
    ("hasindexes", Bool), ("hasrules", Bool), ("hastriggers", Bool), ("rowsecurity", Bool),
]);

rel!(PG_VIEWS, "pg_views", 12005, 'v', [("schemaname", Name), ("viewname", Name), ("viewowner", Name), ("definition", Text)]);

rel!(PG_MATVIEWS, "pg_matviews", 12006, 'v', [
    ("schemaname", Name), ("matviewname", Name), ("matviewowner", Name), ("tablespace", Name),
    ("hasindexes", Bool), ("ispopulated", Bool), ("definition", Text),
]);

rel!(PG_INDEXES, "pg_indexes", 12007, 'v', [
    ("schemaname", Name), ("tablename", Name), ("indexname", Name), ("tablespace", Name), ("indexdef", Text),
]);

rel!(PG_STAT_USER_TABLES, "pg_stat_user_tables", 12008, 'v', [
    ("relid", Oid), ("schemaname", Name), ("relname", Name), ("seq_scan", I8), ("seq_tup_read", I8),
    ("idx_scan", I8), ("idx_tup_fetch", I8), ("n_tup_ins", I8), ("n_tup_upd", I8), ("n_tup_del", I8),
    ("n_tup_hot_upd", I8), ("n_live_tup", I8), ("n_dead_tup", I8), ("n_mod_since_analyze", I8),
    ("n_ins_since_vacuum", I8), ("last_vacuum", Ts), ("last_autovacuum", Ts), ("last_analyze", Ts),
    ("last_autoanalyze", Ts), ("vacuum_count", I8), ("autovacuum_count", I8), ("analyze_count", I8),
    ("autoanalyze_count", I8),
]);

rel!(PG_STAT_ACTIVITY, "pg_stat_activity", 12009, 'v', [
    ("datid", Oid), ("datname", Name), ("pid", I4), ("leader_pid", I4), ("usesysid", Oid), ("usename", Name),
    ("application_name", Text), ("client_addr", Text), ("client_hostname", Text), ("client_port", I4),
    ("backend_start", Ts), ("xact_start", Ts), ("query_start", Ts), ("state_change", Ts),
    ("wait_event_type", Text), ("wait_event", Text), ("state", Text), ("backend_xid", I4),
    ("backend_xmin", I4), ("query_id", I8), ("query", Text), ("backend_type", Text),
]);

rel!(PG_POLICY, "pg_policy", 3256, 'r', [
    ("oid", Oid), ("polname", Name), ("polrelid", Oid), ("polcmd", Char), ("polpermissive", Bool),
    ("polroles", OidArr), ("polqual", Text), ("polwithcheck", Text),
]);

rel!(PG_STATISTIC_EXT, "pg_statistic_ext", 3381, 'r', [
    ("oid", Oid), ("stxrelid", Oid), ("stxname", Name), ("stxnamespace", Oid), ("stxowner", Oid),
    ("stxstattarget", I4), ("stxkeys", I2Arr), ("stxkind", TextArr), ("stxexprs", Text),
]);

rel!(PG_PUBLICATION, "pg_publication", 6104, 'r', [
    ("oid", Oid), ("pubname", Name), ("pubowner", Oid), ("puballtables", Bool), ("pubinsert", Bool),
    ("pubupdate", Bool), ("pubdelete", Bool), ("pubtruncate", Bool), ("pubviaroot", Bool),
]);

rel!(PG_PUBLICATION_NAMESPACE, "pg_publication_namespace", 6237, 'r', [("oid", Oid), ("pnpubid", Oid), ("pnnspid", Oid)]);

rel!(PG_PUBLICATION_REL, "pg_publication_rel", 6106, 'r', [
    ("oid", Oid), ("prpubid", Oid), ("prrelid", Oid), ("prqual", Text), ("prattrs", I2Arr),
]);

rel!(PG_TRIGGER, "pg_trigger", 2620, 'r', [
    ("oid", Oid), ("tgrelid", Oid), ("tgparentid", Oid), ("tgname", Name), ("tgfoid", Oid), ("tgtype", I2),
    ("tgenabled", Char), ("tgisinternal", Bool), ("tgconstrrelid", Oid), ("tgconstrindid", Oid),
    ("tgconstraint", Oid), ("tgdeferrable", Bool), ("tginitdeferred", Bool), ("tgnargs", I2),
    ("tgattr", I2Arr), ("tgargs", Text), ("tgqual", Text), ("tgoldtable", Name), ("tgnewtable", Name),
]);

rel!(PG_SEQUENCE, "pg_sequence", 2224, 'r', [
    ("seqrelid", Oid), ("seqtypid", Oid), ("seqstart", I8), ("seqincrement", I8), ("seqmax", I8),
    ("seqmin", I8), ("seqcache", I8), ("seqcycle", Bool),
]);

rel!(PG_FOREIGN_TABLE, "pg_foreign_table", 3118, 'r', [("ftrelid", Oid), ("ftserver", Oid), ("ftoptions", TextArr)]);

rel!(PG_PARTITIONED_TABLE, "pg_partitioned_table", 3350, 'r', [
    ("partrelid", Oid), ("partstrat", Char), ("partnatts", I2), ("partdefid", Oid), ("partattrs", I2Arr),
    ("partclass", OidArr), ("partcollation", OidArr), ("partexprs", Text),
]);

rel!(PG_TABLESPACE, "pg_tablespace", 1213, 'r', [
    ("oid", Oid), ("spcname", Name), ("spcowner", Oid), ("spcacl", TextArr), ("spcoptions", TextArr),
]);

rel!(PG_DEPEND, "pg_depend", 2608, 'r', [
    ("classid", Oid), ("objid", Oid), ("objsubid", I4), ("refclassid", Oid), ("refobjid", Oid),
    ("refobjsubid", I4), ("deptype", Char),
]);

rel!(PG_SHDESCRIPTION, "pg_shdescription", 2396, 'r', [("objoid", Oid), ("classoid", Oid), ("description", Text)]);

rel!(PG_OPCLASS, "pg_opclass", 2616, 'r', [
    ("oid", Oid), ("opcmethod", Oid), ("opcname", Name), ("opcnamespace", Oid), ("opcowner", Oid),
    ("opcfamily", Oid), ("opcintype", Oid), ("opcdefault", Bool), ("opckeytype", Oid),
]);

rel!(PG_OPERATOR, "pg_operator", 2617, 'r', [
    ("oid", Oid), ("oprname", Name), ("oprnamespace", Oid), ("oprowner", Oid), ("oprkind", Char),
    ("oprcanmerge", Bool), ("oprcanhash", Bool), ("oprleft", Oid), ("oprright", Oid), ("oprresult", Oid),
    ("oprcom", Oid), ("oprnegate", Oid), ("oprcode", Regproc), ("oprrest", Regproc), ("oprjoin", Regproc),
]);

rel!(PG_CAST, "pg_cast", 2605, 'r', [
    ("oid", Oid), ("castsource", Oid), ("casttarget", Oid), ("castfunc", Oid), ("castcontext", Char), ("castmethod", Char),
]);

rel!(PG_LANGUAGE, "pg_language", 2612, 'r', [
    ("oid", Oid), ("lanname", Name), ("lanowner", Oid), ("lanispl", Bool), ("lanpltrusted", Bool),
    ("lanplcallfoid", Oid), ("laninline", Oid), ("lanvalidator", Oid), ("lanacl", TextArr),
]);

rel!(PG_EVENT_TRIGGER, "pg_event_trigger", 3466, 'r', [
    ("oid", Oid), ("evtname", Name), ("evtevent", Name), ("evtowner", Oid), ("evtfoid", Oid),
    ("evtenabled", Char), ("evttags", TextArr),
]);

rel!(PG_SEQUENCES, "pg_sequences", 12010, 'v', [
    ("schemaname", Name), ("sequencename", Name), ("sequenceowner", Name), ("data_type", Text),
    ("start_value", I8), ("min_value", I8), ("max_value", I8), ("increment_by", I8), ("cycle", Bool),
    ("cache_size", I8), ("last_value", I8),
]);

rel!(PG_LOCKS, "pg_locks", 12011, 'v', [
    ("locktype", Text), ("database", Oid), ("relation", Oid), ("pid", I4), ("mode", Text), ("granted", Bool),
]);

rel!(PG_FOREIGN_SERVER, "pg_foreign_server", 1417, 'r', [
    ("oid", Oid), ("srvname", Name), ("srvowner", Oid), ("srvfdw", Oid), ("srvtype", Text), ("srvversion", Text),
    ("srvacl", TextArr), ("srvoptions", TextArr),
]);

rel!(PG_FOREIGN_DATA_WRAPPER, "pg_foreign_data_wrapper", 2328, 'r', [
    ("oid", Oid), ("fdwname", Name), ("fdwowner", Oid), ("fdwhandler", Oid), ("fdwvalidator", Oid),
    ("fdwacl", TextArr), ("fdwoptions", TextArr),
]);

rel!(PG_DEFAULT_ACL, "pg_default_acl", 826, 'r', [
    ("oid", Oid), ("defaclrole", Oid), ("defaclnamespace", Oid), ("defaclobjtype", Char), ("defaclacl", TextArr),
]);

rel!(PG_INIT_PRIVS, "pg_init_privs", 3394, 'r', [
    ("objoid", Oid), ("classoid", Oid), ("objsubid", I4), ("privtype", Char), ("initprivs", TextArr),
]);

rel!(PG_STATISTIC, "pg_statistic", 2619, 'r', [("starelid", Oid), ("staattnum", I2), ("stainherit", Bool), ("stanullfrac", F4)]);

rel!(PG_CONVERSION, "pg_conversion", 2607, 'r', [
    ("oid", Oid), ("conname", Name), ("connamespace", Oid), ("conowner", Oid), ("conforencoding", I4),
    ("contoencoding", I4), ("conproc", Regproc), ("condefault", Bool),
]);

/// Every `pg_catalog` relation.
pub static PG_CATALOG_RELS: &[&RelDef] = &[
    &PG_CLASS, &PG_NAMESPACE, &PG_ATTRIBUTE, &PG_TYPE, &PG_ATTRDEF, &PG_INDEX, &PG_CONSTRAINT, &PG_DESCRIPTION,
    &PG_DATABASE, &PG_ROLES, &PG_AUTHID, &PG_USER, &PG_AUTH_MEMBERS, &PG_SETTINGS, &PG_PROC, &PG_AM, &PG_RANGE,
    &PG_ENUM, &PG_EXTENSION, &PG_COLLATION, &PG_REWRITE, &PG_INHERITS, &PG_TABLES, &PG_VIEWS, &PG_MATVIEWS,
    &PG_INDEXES, &PG_STAT_USER_TABLES, &PG_STAT_ACTIVITY, &PG_POLICY, &PG_STATISTIC_EXT, &PG_PUBLICATION,
    &PG_PUBLICATION_NAMESPACE, &PG_PUBLICATION_REL, &PG_TRIGGER, &PG_SEQUENCE, &PG_FOREIGN_TABLE,
    &PG_PARTITIONED_TABLE, &PG_TABLESPACE, &PG_DEPEND, &PG_SHDESCRIPTION, &PG_OPCLASS, &PG_OPERATOR, &PG_CAST,
    &PG_LANGUAGE, &PG_EVENT_TRIGGER, &PG_SEQUENCES, &PG_LOCKS, &PG_FOREIGN_SERVER, &PG_FOREIGN_DATA_WRAPPER,
    &PG_DEFAULT_ACL, &PG_INIT_PRIVS, &PG_STATISTIC, &PG_CONVERSION,
];

rel!(IS_SCHEMATA, "schemata", 13001, 'v', [
    ("catalog_name", Name), ("schema_name", Name), ("schema_owner", Name), ("default_character_set_catalog", Name),
    ("default_character_set_schema", Name), ("default_character_set_name", Name), ("sql_path", Text),
]);

rel!(IS_TABLES, "tables", 13002, 'v', [
    ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("table_type", Text),
    ("self_referencing_column_name", Name), ("reference_generation", Text), ("user_defined_type_catalog", Name),
    ("user_defined_type_schema", Name), ("user_defined_type_name", Name), ("is_insertable_into", Text),
    ("is_typed", Text), ("commit_action", Text),
]);

rel!(IS_COLUMNS, "columns", 13003, 'v', [
    ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("column_name", Name),
    ("ordinal_position", I4), ("column_default", Text), ("is_nullable", Text), ("data_type", Text),
    ("character_maximum_length", I4), ("character_octet_length", I4), ("numeric_precision", I4),
    ("numeric_precision_radix", I4), ("numeric_scale", I4), ("datetime_precision", I4),
    ("interval_type", Text), ("interval_precision", I4), ("character_set_catalog", Name),
    ("character_set_schema", Name), ("character_set_name", Name), ("collation_catalog", Name),
    ("collation_schema", Name), ("collation_name", Name), ("domain_catalog", Name), ("domain_schema", Name),
    ("domain_name", Name), ("udt_catalog", Name), ("udt_schema", Name), ("udt_name", Name),
    ("scope_catalog", Name), ("scope_schema", Name), ("scope_name", Name), ("maximum_cardinality", I4),
    ("dtd_identifier", Name), ("is_self_referencing", Text), ("is_identity", Text), ("identity_generation", Text),
    ("identity_start", Text), ("identity_increment", Text), ("identity_maximum", Text), ("identity_minimum", Text),
    ("identity_cycle", Text), ("is_generated", Text), ("generation_expression", Text), ("is_updatable", Text),
]);

rel!(IS_VIEWS, "views", 13004, 'v', [
    ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("view_definition", Text),
    ("check_option", Text), ("is_updatable", Text), ("is_insertable_into", Text), ("is_trigger_updatable", Text),
    ("is_trigger_deletable", Text), ("is_trigger_insertable_into", Text),
]);

rel!(IS_TABLE_CONSTRAINTS, "table_constraints", 13005, 'v', [
    ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name), ("table_catalog", Name),
    ("table_schema", Name), ("table_name", Name), ("constraint_type", Text), ("is_deferrable", Text),
    ("initially_deferred", Text), ("enforced", Text), ("nulls_distinct", Text),
]);

rel!(IS_KEY_COLUMN_USAGE, "key_column_usage", 13006, 'v', [
    ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name), ("table_catalog", Name),
    ("table_schema", Name), ("table_name", Name), ("column_name", Name), ("ordinal_position", I4),
    ("position_in_unique_constraint", I4),
]);

rel!(IS_REFERENTIAL_CONSTRAINTS, "referential_constraints", 13007, 'v', [
    ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name),
    ("unique_constraint_catalog", Name), ("unique_constraint_schema", Name), ("unique_constraint_name", Name),
    ("match_option", Text), ("update_rule", Text), ("delete_rule", Text),
]);

rel!(IS_ROUTINES, "routines", 13008, 'v', [
    ("specific_catalog", Name), ("specific_schema", Name), ("specific_name", Name), ("routine_catalog", Name),
    ("routine_schema", Name), ("routine_name", Name), ("routine_type", Text), ("data_type", Text),
]);

/// Every `information_schema` relation.
pub static INFORMATION_SCHEMA_RELS: &[&RelDef] = &[
    &IS_SCHEMATA, &IS_TABLES, &IS_COLUMNS, &IS_VIEWS, &IS_TABLE_CONSTRAINTS, &IS_KEY_COLUMN_USAGE,
    &IS_REFERENTIAL_CONSTRAINTS, &IS_ROUTINES,
];

/// The `pg_catalog` relation named `name`.
pub fn pg_catalog_rel(name: &str) -> Option<&'static RelDef> {
    PG_CATALOG_RELS.iter().copied().find(|r| r.name == name)
}

/// The `information_schema` relation named `name`.
pub fn information_schema_rel(name: &str) -> Option<&'static RelDef> {
    INFORMATION_SCHEMA_RELS.iter().copied().find(|r| r.name == name)
}
