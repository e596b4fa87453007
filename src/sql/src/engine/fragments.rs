//! Cutting a view's operator tree into fragments (docs/architecture.md, "Parallel
//! fragments"): a pure function of one build of the view. The tree is cut before every
//! operator partitioned by key (`Distribution::Hash`) and at every join (each of its inputs
//! comes through an exchange routed by its join key); what lies between cuts — stateless
//! operators, unions, the inputs read from upstream relations — stays in one fragment. Every
//! fragment runs as many actors as the view has builds, actor `i` owning the same vnode range
//! in each, so a fragment may mix inputs routed by different keys.

use std::sync::Arc;

use eddy_common::{internal_err, Result};
use eddy_stream::operator::{BinaryOperator, Distribution, Operator, Side};
use eddy_stream::{Router, Stage};

use super::{ViewBranch, ViewOperators};

/// Where a fragment's input comes from.
pub enum Source {
    /// An upstream relation (or the view's reader of a source), routed by its own key; its
    /// actors backfill from it.
    Upstream(ViewBranch),
    /// Fragment `.0` of the same view, through an exchange routed by `.1`.
    Exchange(usize, Arc<dyn Router>),
}

/// One input of a fragment: its source, the operators applied to it alone, and the stage of
/// the fragment it feeds.
pub struct Input {
    pub source: Source,
    pub operators: Vec<Box<dyn Operator>>,
    pub parent: (usize, Side),
}

/// One fragment: its inputs and the stages where they meet (children first; the last is its
/// root, whose output goes to the fragment consuming it, or for the last fragment to the view).
pub struct Fragment {
    pub inputs: Vec<Input>,
    pub stages: Vec<Stage>,
}

/// True if the plan can be cut: no operator needs one actor, and every join can be split.
pub fn can_cut(branches: &[ViewBranch], stages: &[Stage]) -> bool {
    let ops = branches.iter().flat_map(|b| &b.operators).chain(stages.iter().flat_map(|s| &s.operators));
    let joins = stages.iter().filter_map(|s| s.join.as_ref());
    !branches.is_empty() && ops.into_iter().all(|op| !matches!(op.distribution(), Distribution::Single)) && joins.into_iter().all(|j| j.routers().is_some())
}

/// Where an unfinished fragment's output currently ends.
#[derive(Clone, Copy)]
enum End {
    Input(usize),
    Stage(usize),
}

/// An input of a fragment being built: its stage is unknown while it is the open end.
type OpenInput = (Source, Vec<Box<dyn Operator>>, Option<(usize, Side)>);

/// A fragment being built (see [`cut`]): its output end is still open.
struct Open {
    inputs: Vec<OpenInput>,
    stages: Vec<Stage>,
    end: End,
}

impl Open {
    fn from(source: Source) -> Self {
        Open { inputs: vec![(source, Vec::new(), None)], stages: Vec::new(), end: End::Input(0) }
    }

    fn push(&mut self, op: Box<dyn Operator>) {
        match self.end {
            End::Input(i) => self.inputs[i].1.push(op),
            End::Stage(s) => self.stages[s].operators.push(op),
        }
    }

    /// Points the open end at stage `stage` of this fragment, as input `side`.
    fn attach(&mut self, stage: usize, side: Side) {
        match self.end {
            End::Input(i) => self.inputs[i].2 = Some((stage, side)),
            End::Stage(s) => self.stages[s].parent = Some((stage, side)),
        }
    }

    /// Takes `other` in (its stages after this one's); returns where `other`'s end now is.
    fn absorb(&mut self, other: Open) -> End {
        let base = self.stages.len();
        let shift = |p: Option<(usize, Side)>| p.map(|(s, side)| (s + base, side));
        let end = match other.end {
            End::Input(i) => End::Input(self.inputs.len() + i),
            End::Stage(s) => End::Stage(base + s),
        };
        for (source, ops, parent) in other.inputs {
            self.inputs.push((source, ops, shift(parent)));
        }
        for mut s in other.stages {
            s.parent = shift(s.parent);
            self.stages.push(s);
        }
        end
    }
}

/// The cut in progress: finished fragments, children before the fragments they feed.
struct Cutter {
    fragments: Vec<Fragment>,
}

impl Cutter {
    /// Finishes `open` (its end becomes its root's output) and returns its index.
    fn close(&mut self, mut open: Open) -> usize {
        if let End::Input(_) = open.end {
            let root = open.stages.len();
            open.stages.push(Stage { join: None, operators: Vec::new(), parent: None });
            open.attach(root, Side::Left);
            open.end = End::Stage(root);
        }
        let inputs = open
            .inputs
            .into_iter()
            .map(|(source, operators, parent)| Input { source, operators, parent: parent.unwrap_or((0, Side::Left)) })
            .collect();
        self.fragments.push(Fragment { inputs, stages: open.stages });
        self.fragments.len() - 1
    }

    /// Applies a chain of operators to `open`, starting a new fragment before each one
    /// partitioned by key.
    fn chain(&mut self, mut open: Open, ops: Vec<Box<dyn Operator>>) -> Result<Open> {
        for op in ops {
            match op.distribution() {
                Distribution::Any => {}
                Distribution::Hash(router) => {
                    let before = self.close(open);
                    open = Open::from(Source::Exchange(before, router));
                }
                Distribution::Single => return Err(internal_err!("{op} cannot run in parallel")),
            }
            open.push(op);
        }
        Ok(open)
    }
}

/// The tree's nodes, for the walk from the root.
enum Node {
    Branch(ViewBranch),
    Stage(Stage),
}

/// Cuts one build of a view into fragments (the last one is the view's output).
pub fn cut(ops: ViewOperators) -> Result<Vec<Fragment>> {
    let mut nodes: Vec<Option<Node>> = Vec::new();
    // Children of each stage, in plan order: node index and side.
    let mut children: Vec<Vec<(usize, Side)>> = (0..ops.stages.len()).map(|_| Vec::new()).collect();
    for b in ops.branches {
        let (parent, side) = b.parent;
        children.get_mut(parent).ok_or_else(|| internal_err!("a branch feeds no stage"))?.push((nodes.len(), side));
        nodes.push(Some(Node::Branch(b)));
    }
    let mut stage_node = Vec::new();
    let mut root = None;
    for s in ops.stages {
        stage_node.push(nodes.len());
        match s.parent {
            Some((parent, side)) => children.get_mut(parent).ok_or_else(|| internal_err!("a stage feeds no stage"))?.push((nodes.len(), side)),
            None => root = Some(nodes.len()),
        }
        nodes.push(Some(Node::Stage(s)));
    }
    let root = root.ok_or_else(|| internal_err!("a view plan without a root stage"))?;
    let mut cutter = Cutter { fragments: Vec::new() };
    let open = lower(&mut cutter, &mut nodes, &children, &stage_node, root)?;
    cutter.close(open);
    Ok(cutter.fragments)
}

fn lower(cutter: &mut Cutter, nodes: &mut [Option<Node>], children: &[Vec<(usize, Side)>], stage_node: &[usize], at: usize) -> Result<Open> {
    let node = nodes.get_mut(at).and_then(Option::take).ok_or_else(|| internal_err!("a plan node visited twice"))?;
    match node {
        Node::Branch(mut b) => {
            let ops = std::mem::take(&mut b.operators);
            cutter.chain(Open::from(Source::Upstream(b)), ops)
        }
        Node::Stage(mut stage) => {
            let s = stage_node.iter().position(|&n| n == at).ok_or_else(|| internal_err!("an unknown stage"))?;
            let ops = std::mem::take(&mut stage.operators);
            let mut open = match stage.join.take() {
                // Each side of a join comes through an exchange by its join key.
                Some(join) => {
                    let routers = join.routers().ok_or_else(|| internal_err!("{join} cannot run in parallel"))?;
                    let mut sources = Vec::new();
                    for &(child, side) in &children[s] {
                        let input = lower(cutter, nodes, children, stage_node, child)?;
                        let router = routers[usize::from(side == Side::Right)].clone();
                        sources.push((Source::Exchange(cutter.close(input), router), side));
                    }
                    let mut open = Open { inputs: Vec::new(), stages: vec![join_stage(join)], end: End::Stage(0) };
                    for (source, side) in sources {
                        open.inputs.push((source, Vec::new(), Some((0, side))));
                    }
                    open
                }
                // A union: its inputs' fragments become one, meeting in the union's stage.
                None => {
                    let mut merged: Option<Open> = None;
                    let mut ends = Vec::new();
                    for &(child, side) in &children[s] {
                        let input = lower(cutter, nodes, children, stage_node, child)?;
                        match merged.as_mut() {
                            None => {
                                ends.push((input.end, side));
                                merged = Some(input);
                            }
                            Some(m) => ends.push((m.absorb(input), side)),
                        }
                    }
                    let mut open = merged.ok_or_else(|| internal_err!("a stage without inputs"))?;
                    let union = open.stages.len();
                    open.stages.push(Stage { join: None, operators: Vec::new(), parent: None });
                    for (end, side) in ends {
                        open.end = end;
                        open.attach(union, side);
                    }
                    open.end = End::Stage(union);
                    open
                }
            };
            open = cutter.chain(open, ops)?;
            Ok(open)
        }
    }
}

fn join_stage(join: Box<dyn BinaryOperator>) -> Stage {
    Stage { join: Some(join), operators: Vec::new(), parent: None }
}
