-- test/scenarios/ext_catalog.sql -- every member object of the extension
-- redis_primitives, one line per property, sorted: what upgrade.sh compares
-- between a 1.0 database taken through ALTER EXTENSION ... UPDATE and a fresh
-- CREATE EXTENSION.  No OIDs appear, only names and definitions, so two
-- databases that agree print the same text.
--
-- Members are found through pg_depend (deptype 'e'), so an object an upgrade
-- script creates but forgets to attach to the extension, or one it forgets
-- to create, shows up as a line only one side has.  Each line is
--   <object identity> | <property>: <value>
-- and covers, for functions, the whole definition pg_get_functiondef prints
-- (arguments and defaults, return type, language, volatility, strictness,
-- parallel safety, SECURITY DEFINER, LEAKPROOF, cost, rows, SET options, body
-- or symbol), plus ACL and comment; for tables, every column, constraint,
-- index, trigger, rule, policy, ACL and comment; for types, attributes,
-- labels or domain constraints; and the pg_dump configuration of the
-- extension itself.
\set QUIET on
\pset format unaligned
\pset tuples_only on
\pset footer off

WITH ext AS (
  SELECT oid, extconfig, extcondition, extrelocatable, extnamespace
  FROM pg_catalog.pg_extension WHERE extname = 'redis_primitives'
),
member AS (
  SELECT d.classid, d.objid, d.objsubid,
         pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) AS ident
  FROM pg_catalog.pg_depend d, ext
  WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
    AND d.refobjid = ext.oid AND d.deptype = 'e'
),
rel AS (            -- member relations (tables, views, sequences, ...)
  SELECT m.ident, c.oid, c.relkind FROM member m
  JOIN pg_catalog.pg_class c ON c.oid = m.objid
  WHERE m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
),
lines(ident, prop) AS (
  -- the member itself: its kind and, for every kind, its comment
  SELECT ident, 'member' FROM member
  UNION ALL
  SELECT m.ident, 'comment: ' || pg_catalog.obj_description(m.objid, c.relname)
  FROM member m JOIN pg_catalog.pg_class c ON c.oid = m.classid
  WHERE pg_catalog.obj_description(m.objid, c.relname) IS NOT NULL
  -- the privileges pg_dump takes as the extension's own (pg_init_privs)
  UNION ALL
  SELECT m.ident, 'initial privileges ' || ip.privtype::pg_catalog.text || ': ' || ip.initprivs::pg_catalog.text
  FROM member m JOIN pg_catalog.pg_init_privs ip
    ON ip.classoid = m.classid AND ip.objoid = m.objid AND ip.objsubid = m.objsubid
  -- functions and procedures
  UNION ALL
  -- one line of the definition per line, numbered, so a difference shows
  -- the line that differs
  SELECT m.ident, 'definition ' || pg_catalog.lpad(def.n::pg_catalog.text, 3, '0') || ': ' || def.line
  FROM member m JOIN pg_catalog.pg_proc p ON p.oid = m.objid,
  LATERAL pg_catalog.regexp_split_to_table(
    CASE WHEN p.prokind IN ('f', 'p') THEN pg_catalog.pg_get_functiondef(p.oid)
         ELSE p.prokind::pg_catalog.text || ' ' || pg_catalog.pg_get_function_identity_arguments(p.oid) END,
    E'\n') WITH ORDINALITY AS def(line, n)
  WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
  UNION ALL
  SELECT m.ident, 'acl: ' || coalesce(p.proacl::pg_catalog.text, '(default)')
  FROM member m JOIN pg_catalog.pg_proc p ON p.oid = m.objid
  WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
  -- types: kind, attributes of composites, enum labels, domains
  UNION ALL
  SELECT m.ident, 'type: ' || t.typtype::pg_catalog.text || ' ' || pg_catalog.format_type(t.oid, NULL)
         || coalesce(' over ' || pg_catalog.format_type(nullif(t.typbasetype, 0), t.typtypmod), '')
         || ' notnull=' || t.typnotnull || ' default=' || coalesce(t.typdefault, '-')
  FROM member m JOIN pg_catalog.pg_type t ON t.oid = m.objid
  WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
  UNION ALL
  SELECT m.ident, 'attribute ' || a.attnum || ': ' || a.attname || ' '
         || pg_catalog.format_type(a.atttypid, a.atttypmod)
  FROM member m JOIN pg_catalog.pg_type t ON t.oid = m.objid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
  WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.typtype = 'c'
  UNION ALL
  SELECT m.ident, 'label ' || e.enumsortorder || ': ' || e.enumlabel
  FROM member m JOIN pg_catalog.pg_enum e ON e.enumtypid = m.objid
  WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
  UNION ALL
  SELECT m.ident, 'constraint ' || co.conname || ': ' || pg_catalog.pg_get_constraintdef(co.oid)
  FROM member m JOIN pg_catalog.pg_constraint co ON co.contypid = m.objid
  WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
  UNION ALL
  SELECT m.ident, 'acl: ' || t.typacl::pg_catalog.text
  FROM member m JOIN pg_catalog.pg_type t ON t.oid = m.objid
  WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.typacl IS NOT NULL
  -- relations
  UNION ALL
  SELECT r.ident, 'relation: kind=' || c.relkind::pg_catalog.text || ' persistence=' || c.relpersistence::pg_catalog.text
         || ' options=' || coalesce(c.reloptions::pg_catalog.text, '-')
         || ' rls=' || c.relrowsecurity || ' acl=' || coalesce(c.relacl::pg_catalog.text, '(default)')
  FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid
  UNION ALL
  SELECT r.ident, 'column ' || a.attnum || ': ' || a.attname || ' '
         || pg_catalog.format_type(a.atttypid, a.atttypmod)
         || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
         || coalesce(' DEFAULT ' || pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), '')
         || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::pg_catalog.text ELSE '' END
         || CASE WHEN a.attgenerated <> '' THEN ' GENERATED ' || a.attgenerated::pg_catalog.text ELSE '' END
         || coalesce(' COLLATE ' || nullif(a.attcollation, 0)::pg_catalog.regcollation::pg_catalog.text, '')
         || coalesce(' acl=' || a.attacl::pg_catalog.text, '')
         || coalesce(' comment=' || pg_catalog.col_description(r.oid, a.attnum), '')
  FROM rel r JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
  UNION ALL
  SELECT r.ident, 'constraint ' || co.conname || ': ' || pg_catalog.pg_get_constraintdef(co.oid)
  FROM rel r JOIN pg_catalog.pg_constraint co ON co.conrelid = r.oid
  UNION ALL
  SELECT r.ident, 'index ' || i.relname || ': ' || pg_catalog.pg_get_indexdef(i.oid)
  FROM rel r JOIN pg_catalog.pg_index x ON x.indrelid = r.oid
  JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
  UNION ALL
  SELECT r.ident, 'trigger ' || t.tgname || ': ' || pg_catalog.pg_get_triggerdef(t.oid)
         || ' enabled=' || t.tgenabled::pg_catalog.text
  FROM rel r JOIN pg_catalog.pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT r.ident, 'rule ' || ru.rulename || ': ' || pg_catalog.pg_get_ruledef(ru.oid)
  FROM rel r JOIN pg_catalog.pg_rewrite ru ON ru.ev_class = r.oid
  UNION ALL
  SELECT r.ident, 'policy ' || po.polname || ': ' || po.polcmd::pg_catalog.text || ' '
         || coalesce(pg_catalog.pg_get_expr(po.polqual, po.polrelid), '-') || ' '
         || coalesce(pg_catalog.pg_get_expr(po.polwithcheck, po.polrelid), '-')
  FROM rel r JOIN pg_catalog.pg_policy po ON po.polrelid = r.oid
  UNION ALL
  SELECT r.ident, 'sequence: ' || s.seqtypid::pg_catalog.regtype || ' ' || s.seqstart || ' '
         || s.seqincrement || ' ' || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcycle
  FROM rel r JOIN pg_catalog.pg_sequence s ON s.seqrelid = r.oid
  -- the extension itself: what pg_dump dumps of it, and where it lives
  UNION ALL
  SELECT 'extension redis_primitives', 'pg_dump data: ' || coalesce(
           (SELECT pg_catalog.string_agg(cfg.rel::pg_catalog.regclass::pg_catalog.text
                                         || ' WHERE ''' || cfg.cond || '''', ', '
                                         ORDER BY cfg.rel::pg_catalog.regclass::pg_catalog.text)
            FROM unnest(ext.extconfig, ext.extcondition) AS cfg(rel, cond)), '(none)')
  FROM ext
  UNION ALL
  SELECT 'extension redis_primitives', 'schema=' || ext.extnamespace::pg_catalog.regnamespace
         || ' relocatable=' || ext.extrelocatable
  FROM ext
)
SELECT ident || ' | ' || pg_catalog.regexp_replace(prop, E'\n', E'\\n', 'g')
FROM lines
ORDER BY 1;
